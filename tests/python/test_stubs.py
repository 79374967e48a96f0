"""The hand-written stubs of the extension (python/stoker/_stoker.pyi) cannot
drift from it, and the public API is documented.

The stubs are read with `ast`; the extension's signatures from pybind11's
docstrings, whose first line is "name(arg: type = default, ...) -> ret" (or,
for an overloaded function, "Overloaded function." and one numbered
signature per overload: "1. name(...)"). Checked both ways:
  - every public name of stoker._stoker is in the stub, and every name the
    stub declares exists at runtime (private ones too: _Loader, which
    stoker.Loader uses, is checked as strictly as the public classes);
  - each class's members (methods, properties; by name, and a property stays
    a property) and base classes;
  - for every function, constructor and method: the parameters' names in
    order, which have defaults and the defaults' values, and that pybind11's
    unnamed arguments (arg0, ...; they cannot be passed by keyword) are
    positional-only in the stub; overloads (typing.overload in the stub) one
    by one.
A stub-only type alias is a private module-level `_Name = ...`; `name: T`
declares an attribute the module must have.

The test hooks (python/src/bind_testing.cc, bind_masks.cc) live in the
submodule _testing, private by name: the stub declares it as a module and no
public name of the extension is exempt (EXEMPT is empty).
"""
import ast
import inspect
import os
import re

import pytest

import stoker
from stoker import _stoker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "python", "stoker")
STUB = os.path.join(PACKAGE, "_stoker.pyi")

# Public runtime names the stub may leave out, each with its reason. Keep it
# empty: a public name belongs in the stub.
EXEMPT = {}
MODULE_ATTRS = {"__doc__", "__file__", "__loader__", "__name__", "__package__", "__spec__"}
CLASS_ATTRS = {"__doc__", "__module__", "__dict__", "__weakref__"}


# --------------------------------------------------------- pybind11's side

def _scan(text, start=0):
    """Yields (index, char, depth) of `text` outside string literals; depth counts open ([{."""
    depth, quote, i = 0, None, start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        else:
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            yield i, c, depth
        i += 1


def _split_top(text, sep):
    """`text` split at each `sep` outside brackets and strings."""
    parts, last = [], 0
    for i, c, depth in _scan(text):
        if c == sep and depth == 0:
            parts.append(text[last:i])
            last = i + 1
    parts.append(text[last:])
    return parts


def _find_top(text, sep):
    for i, c, depth in _scan(text):
        if c == sep and depth == 0:
            return i
    return -1


def parse_signature(line, name):
    """'name(a: int, b: List[int] = [1, 2]) -> None' -> [(param, default text or None)], '/', '*' kept."""
    m = re.match(rf"\s*(?:\d+\.\s+)?{re.escape(name)}\(", line)
    assert m, f"{name}: not a pybind11 signature line: {line!r}"
    inner = None
    for i, c, depth in _scan(line, m.end()):
        if depth == -1:
            inner = line[m.end():i]
            break
    assert inner is not None, f"{name}: unbalanced signature: {line!r}"
    params = []
    for part in _split_top(inner, ","):
        part = part.strip()
        if not part:
            continue
        eq = _find_top(part, "=")
        head, default = (part, None) if eq < 0 else (part[:eq], part[eq + 1:].strip())
        colon = _find_top(head, ":")
        params.append(((head[:colon] if colon >= 0 else head).strip(), default))
    return params


def runtime_signatures(obj, name):
    """The signatures pybind11 wrote into obj.__doc__: one, or one per overload."""
    doc = obj.__doc__ or ""
    lines = doc.splitlines()
    assert lines and lines[0].startswith(name + "("), (
        f"{name}: no pybind11 signature in its __doc__ ({doc[:80]!r}): is it a pybind11 function?")
    if len(lines) > 1 and lines[1].strip() == "Overloaded function.":
        sigs = [parse_signature(ln, name) for ln in lines if re.match(rf"\d+\. {re.escape(name)}\(", ln)]
        assert sigs, f"{name}: 'Overloaded function.' without numbered signatures"
        return sigs
    return [parse_signature(lines[0], name)]


# -------------------------------------------------------------- the stub's side

def _decorators(fn):
    return {d.id if isinstance(d, ast.Name) else d.attr if isinstance(d, ast.Attribute) else "" for d in fn.decorator_list}


def stub_params(fn):
    """A stub function's parameters as [(name, default node or None, positional-only)] ('*args', '**kw' too)."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = [(p.arg, d, i < len(a.posonlyargs)) for i, (p, d) in enumerate(zip(positional, defaults))]
    if a.vararg:
        out.append(("*" + a.vararg.arg, None, False))
    out += [(p.arg, d, False) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append(("**" + a.kwarg.arg, None, False))
    return out


def _literal(text_or_node):
    """A default's value, lists as tuples; None when it is not a literal ('...', a repr)."""
    try:
        v = ast.literal_eval(text_or_node)
    except (ValueError, SyntaxError, TypeError):
        return None
    if v is Ellipsis:
        return None
    norm = lambda x: tuple(norm(y) for y in x) if isinstance(x, (list, tuple)) else x  # noqa: E731
    return ("value", norm(v))


def compare_signatures(qualname, runtime, stub_defs):
    """Problems (strings naming `qualname`) between pybind11's signatures and the stub's defs of one function."""
    overloads = [f for f in stub_defs if "overload" in _decorators(f)]
    if len(runtime) > 1 and len(overloads) != len(runtime):
        return [f"{qualname}: the extension has {len(runtime)} overloads, the stub {len(overloads)} "
                f"@overload defs"]
    if len(runtime) == 1 and (overloads or len(stub_defs) != 1):
        return [f"{qualname}: the extension has one signature, the stub {len(stub_defs)} defs "
                f"({len(overloads)} @overload)"]
    problems = []
    for k, (rt, fn) in enumerate(zip(runtime, overloads or stub_defs)):
        where = qualname if len(runtime) == 1 else f"{qualname} (overload {k + 1})"
        marker = [n for n, _ in rt].index("/") if ("/", None) in rt else 0
        rt_posonly = {n for n, _ in rt[:marker]} | {n for n, _ in rt if re.fullmatch(r"arg\d+", n)}
        rt = [(n, d) for n, d in rt if n not in ("/", "*")]
        st = stub_params(fn)
        rt_names, st_names = [n for n, _ in rt], [n for n, _, _ in st]
        if rt_names != st_names:
            problems.append(f"{where}: parameters {st_names} in the stub, {rt_names} in the extension")
            continue
        for (name, rdef), (_, sdef, posonly) in zip(rt, st):
            if (rdef is None) != (sdef is None):
                problems.append(f"{where}: parameter {name!r} has {'a' if rdef is not None else 'no'} default "
                                f"in the extension ({rdef}), {'a' if sdef is not None else 'no'} default in the stub")
            elif rdef is not None:
                rv = _literal(rdef)
                if rv is not None and rv != _literal(sdef):  # a literal default is shown in the stub
                    problems.append(f"{where}: parameter {name!r} defaults to {rdef} in the extension, "
                                    f"{ast.unparse(sdef)} in the stub")
            if (name in rt_posonly) != posonly and name != "self":
                problems.append(f"{where}: parameter {name!r} is {'' if name in rt_posonly else 'not '}"
                                f"positional-only in the extension (unnamed: pybind11's argN, or before '/'), "
                                f"{'' if posonly else 'not '}in the stub")
    return problems


def _stub_members(body):
    """{name: [FunctionDef...] or the Assign/AnnAssign/ClassDef node} of a module or class body."""
    out = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node
    return out


def check_class(name, cls, node):
    problems = []
    stub_bases = sorted(ast.unparse(b) for b in node.bases)
    rt_bases = sorted(b.__name__ for b in cls.__bases__ if b.__name__ not in ("object", "pybind11_object"))
    if stub_bases != rt_bases:
        problems.append(f"{name}: bases {stub_bases} in the stub, {rt_bases} in the extension")
    stub = {k: v for k, v in _stub_members(node.body).items()}
    runtime = {k: v for k, v in vars(cls).items() if k not in CLASS_ATTRS}
    for k in sorted(set(runtime) - set(stub)):
        problems.append(f"{name}.{k}: in the extension, missing from the stub")
    for k in sorted(set(stub) - set(runtime)):
        problems.append(f"{name}.{k}: in the stub, not in the extension")
    for k in sorted(set(stub) & set(runtime)):
        rt, st = runtime[k], stub[k]
        is_static = isinstance(rt, staticmethod)
        if is_static != (isinstance(st, list) and any("staticmethod" in _decorators(f) for f in st)):
            problems.append(f"{name}.{k}: {'a' if is_static else 'not a'} staticmethod in the extension, "
                            f"{'not ' if is_static else ''}in the stub")
            continue
        rt = rt.__func__ if is_static else rt
        is_prop = isinstance(rt, property)
        stub_prop = isinstance(st, list) and any("property" in _decorators(f) for f in st)
        if is_prop != stub_prop:
            problems.append(f"{name}.{k}: {'a' if is_prop else 'not a'} property in the extension, "
                            f"{'a' if stub_prop else 'not a'} property in the stub")
        elif not is_prop:
            if not isinstance(st, list):
                problems.append(f"{name}.{k}: a method in the extension, not a def in the stub")
            else:
                problems += compare_signatures(f"{name}.{k}", runtime_signatures(rt, k), st)
    return problems


def stub_problems(module, tree):
    problems = []
    stub = _stub_members(tree.body)
    public = {n for n in dir(module) if not n.startswith("_")}
    for n in sorted(public - set(stub) - set(EXEMPT)):
        problems.append(f"{n}: in stoker._stoker, missing from the stub {STUB}")
    for n, node in sorted(stub.items()):
        if isinstance(node, ast.Assign):  # a stub-only type alias
            if not n.startswith("_"):
                problems.append(f"{n}: a public alias only the stub has (declare attributes as `{n}: T`)")
            continue
        if not hasattr(module, n):
            problems.append(f"{n}: in the stub, not in stoker._stoker")
            continue
        obj = getattr(module, n)
        if isinstance(node, ast.ClassDef):
            if not inspect.isclass(obj):
                problems.append(f"{n}: a class in the stub, a {type(obj).__name__} in the extension")
            else:
                problems += check_class(n, obj, node)
        elif isinstance(node, list):
            if not callable(obj) or inspect.isclass(obj):
                problems.append(f"{n}: a function in the stub, a {type(obj).__name__} in the extension")
            else:
                problems += compare_signatures(n, runtime_signatures(obj, n), node)
        elif inspect.isclass(obj) or inspect.isbuiltin(obj):
            problems.append(f"{n}: an attribute (`{n}: T`) in the stub, a {type(obj).__name__} in the extension")
    return problems


def _fail(problems, what):
    if problems:
        pytest.fail(f"{what}:\n  " + "\n  ".join(problems), pytrace=False)


# ------------------------------------------------------------------- the tests

def test_stub_matches_the_extension():
    with open(STUB) as f:
        tree = ast.parse(f.read(), STUB)
    _fail(stub_problems(_stoker, tree), f"{STUB} drifted from stoker._stoker ({_stoker.__file__}); update the stub")


def test_package_is_marked_typed():
    assert os.path.isfile(os.path.join(PACKAGE, "py.typed")), "python/stoker/py.typed (PEP 561) is missing"


def test_exemptions_are_private_or_explained():
    for n, why in EXEMPT.items():
        assert hasattr(_stoker, n), f"EXEMPT names {n!r}, which stoker._stoker no longer has"
        assert why.strip(), f"EXEMPT[{n!r}]: give the reason"


OVERLOADED_DOC = """f(*args, **kwargs)
Overloaded function.

1. f(self: m.X, a: int) -> None

Docs of the first; 2. f( in prose is not a signature.

2. f(self: m.X, arg0: str, arg1: List[Tuple[int, str]] = [(1, 'x,y')], arg2: Dict[str, int] = {'k': 1}) -> None

A doc line with f(a, b) and "quotes.
"""


def _fake(doc):
    return type("Fake", (), {"__doc__": doc})


def test_the_checker_reads_overloads_and_reports_drift():
    """The parser on pybind11's overload format, and the comparison failing, naming the drift."""
    sigs = runtime_signatures(_fake(OVERLOADED_DOC), "f")
    assert sigs == [[("self", None), ("a", None)],
                    [("self", None), ("arg0", None), ("arg1", "[(1, 'x,y')]"), ("arg2", "{'k': 1}")]]
    good = ast.parse("@overload\ndef f(self, a: int) -> None: ...\n"
                     "@overload\ndef f(self, arg0: str, arg1=((1, 'x,y'),), arg2={'k': 1}, /) -> None: ...\n")
    assert compare_signatures("X.f", sigs, good.body) == []
    second = "@overload\ndef f(self, a): ...\n@overload\n"
    drifts = {
        "def f(self, a) -> None: ...": "2 overloads, the stub 0",
        second + "def f(self, arg0, arg1=((1, 'x,y'),), x={'k': 1}, /): ...":
            "overload 2): parameters ['self', 'arg0', 'arg1', 'x']",
        second + "def f(self, arg0, arg1, arg2={'k': 1}, /): ...": "'arg1' has a default in the extension",
        second + "def f(self, arg0, arg1=((2, 'x'),), arg2={'k': 1}, /): ...": "'arg1' defaults to [(1, 'x,y')]",
        second + "def f(self, arg0, arg1=..., arg2={'k': 1}, /): ...": "'arg1' defaults to [(1, 'x,y')]",
        second + "def f(self, arg0, arg1=((1, 'x,y'),), arg2={'k': 1}): ...": "'arg0' is positional-only",
        "@overload\ndef f(self, a, /): ...\n@overload\ndef f(self, arg0, arg1=((1, 'x,y'),), arg2={'k': 1}, /): ...":
            "'a' is not positional-only",
    }
    for src, expected in drifts.items():
        problems = compare_signatures("X.f", sigs, ast.parse(src).body)
        assert any(expected in p and p.startswith("X.f") for p in problems), (src, problems)


# ------------------------------------------------------------ the package's API

def test_loader_signature_is_its_init():
    """help(stoker.Loader) and completion show Loader.__init__'s parameters, defaults and annotations."""
    cls = inspect.signature(stoker.Loader).parameters
    init = list(inspect.signature(stoker.Loader.__init__).parameters.values())
    assert init[0].name == "self"
    assert list(cls.values()) == init[1:], "inspect.signature(stoker.Loader) differs from Loader.__init__"
    missing = [p.name for p in init[1:] if p.annotation is inspect.Parameter.empty]
    assert not missing, f"Loader.__init__: parameters without a type annotation: {missing}"


def _documented_params(obj, doc):
    """Names of obj's constructor/call parameters that its docstring's Args section lacks."""
    if inspect.isclass(obj) and obj.__module__ == _stoker.__name__:
        init = obj.__init__
        if init is object.__init__ or "__init__" not in vars(obj):
            return []  # an exception: no parameters of its own
        names = [n for sig in runtime_signatures(init, "__init__") for n, _ in sig]
    elif obj.__module__ == _stoker.__name__:
        names = [n for sig in runtime_signatures(obj, obj.__name__) for n, _ in sig]
    else:
        names = list(inspect.signature(obj).parameters)
    args = doc.split("Args:", 1)[1] if "Args:" in doc else ""
    return [n for n in names if n not in ("self", "/", "*") and not n.startswith("*")
            and not re.search(rf"^\s+{re.escape(n)} \(", args, re.M)]


def test_public_names_are_documented():
    problems = []
    for name in stoker.__all__:
        obj = getattr(stoker, name)
        doc = inspect.getdoc(obj) or ""
        if not doc.strip():
            problems.append(f"stoker.{name}: no docstring")
            continue
        if "Example" not in doc and ">>>" not in doc:
            problems.append(f"stoker.{name}: its docstring has no Example")
        if "Raises" not in doc and "Raised by" not in doc:
            problems.append(f"stoker.{name}: its docstring has no Raises section")
        missing = _documented_params(obj, doc)
        if missing:
            problems.append(f"stoker.{name}: parameters missing from its docstring's Args: {missing}")
    _fail(problems, "stoker's public API lacks documentation")


def test_loader_and_field_members_are_documented():
    problems = []
    for cls in (stoker.Loader, stoker.profile, *stoker.fields.FIELD_TYPES):
        for k, v in vars(cls).items():
            if k.startswith("_") and k not in ("__len__", "__iter__"):
                continue
            fn = v.fget if isinstance(v, property) else v
            if not callable(fn):
                continue
            doc = inspect.getdoc(fn) or ""
            if not doc.strip():
                problems.append(f"stoker.{cls.__name__}.{k}: no docstring")
            elif not isinstance(v, property):
                missing = _documented_params(fn, doc)
                if missing:
                    problems.append(f"stoker.{cls.__name__}.{k}: parameters missing from its Args: {missing}")
    _fail(problems, "public members without documentation")


def test_extension_examples_run():
    """The examples of the transforms and SampleError (no files needed) print what their docstrings say."""
    import doctest
    for cls in (*_stoker._transform_types, stoker.SampleError):
        for t in doctest.DocTestFinder(recurse=False).find(cls, cls.__name__, globs={"stoker": stoker}):
            runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
            runner.run(t, out=lambda s: None)
            assert runner.summarize(verbose=False).failed == 0, f"stoker.{cls.__name__}: its Example fails"
            assert t.examples, f"stoker.{cls.__name__}: no >>> example"
