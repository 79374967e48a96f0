"""stoker.Mix: one loader over several data sets, each drawn with a weight.

The rules (how an epoch's draws are made, how sources are walked) are those
of include/stoker/mixture.h; this class only carries the arguments to the C++
codec, which checks them and names what is wrong.
"""
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

_Path = Union[str, os.PathLike]

#: The record member holding a mixture sample's source index:
#: ``stoker.Label("source", member=stoker.Mix.SOURCE)`` puts it in the batch.
SOURCE = "mix:source"


def _specs(name: str, source: Any) -> List[str]:
    if isinstance(source, (str, os.PathLike)):
        return [os.fspath(source)]
    if isinstance(source, (list, tuple)) and source and all(isinstance(s, (str, os.PathLike)) for s in source):
        return [os.fspath(s) for s in source]
    raise ValueError(f"Mix: source {name!r} must be a path (str or os.PathLike) or a non-empty list of shard paths, "
                     f"got {source!r}")


def _per_source(what: str, value: Optional[Mapping[str, Any]], names: Sequence[str]) -> Dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"Mix: {what} must be a dict keyed by source name, got {value!r}")
    unknown = [k for k in value if k not in names]
    if unknown:
        raise ValueError(f"Mix: {what} names {unknown[0]!r}, which is not a source ({', '.join(names)})")
    return dict(value)


class Mix:
    """A weighted mixture of data sets, to pass as a Loader's ``source``.

    An epoch is ``samples_per_epoch`` draws. Each source gets its weight's
    share of them (rounded by largest remainder, the same every epoch, so an
    epoch holds the weights exactly); the Loader's ``shuffle`` spreads them
    through the epoch, so which source a batch position draws from is a
    function of (seed, epoch, position). Each source is walked without
    replacement in its own permutation, a new one per pass, and restarted
    when exhausted; passes carry over from epoch to epoch (epoch e takes
    draws e x count .. (e + 1) x count - 1 of each source). Without shuffle,
    the epoch is each source's draws in turn, each source in index order.

    The order, rank sharding, drop_last, state_dict() and elastic resume
    apply to the draws as to the records of one data set: deterministic,
    independent of the thread count, exactly resumable. A record drawn
    twice in an epoch gets two different augmentations (each sample's
    randomness is keyed by its position). ``stats()["mixture"]`` gives per
    source its weight's share, its draws per epoch and the samples handed
    out so far.

    Args:
        sources (dict): name -> source, each as Loader's ``source`` (a
            folder, a list file, tar shards or a list of shard paths), in
            order: the source index of a sample is its place here.
        weights (dict, optional): name -> weight >= 0 for every source
            (they need not sum to 1); None = each source's size (with the
            default samples_per_epoch: each source once per epoch, a
            concatenation). Default None.
        samples_per_epoch (int, optional): draws per epoch, before rank
            sharding; None = the sum of the sources' sizes. Default None.
        label_offset (dict, optional): name -> an integer added to that
            source's labels (labels of -1, "none", stay -1). Default None.
        label_map (dict, optional): name -> {label: new label} for that
            source; a label missing from its map is an error of that sample
            (counted, skipped or raised per on_corrupt). Default None.

    Attributes:
        SOURCE (str): the member holding a sample's source index:
            ``fields=[stoker.Image(), stoker.Label(), stoker.Label("source",
            member=stoker.Mix.SOURCE)]`` gives ``batch["source"]`` (int64).

    Raises:
        ValueError: a source, weight or label argument of the wrong type or
            naming no source (here), or out of range (by the Loader).

    Example:
        >>> mix = stoker.Mix({"imagenet": "data/train", "extra": "s/extra-{000..031}.tar"},
        ...                  weights={"imagenet": 0.8, "extra": 0.2}, samples_per_epoch=1_000_000,
        ...                  label_offset={"extra": 1000})
        >>> loader = stoker.Loader(mix, batch_size=256, shuffle=True, transforms=[...])
    """

    SOURCE = SOURCE

    def __init__(self, sources: Mapping[str, Union[_Path, Sequence[_Path]]],
                 weights: Optional[Mapping[str, float]] = None, samples_per_epoch: Optional[int] = None,
                 label_offset: Optional[Mapping[str, int]] = None,
                 label_map: Optional[Mapping[str, Mapping[int, int]]] = None) -> None:
        if not isinstance(sources, Mapping) or not sources:
            raise ValueError(f"Mix: sources must be a non-empty dict of name -> path, got {sources!r}")
        names = list(sources)
        for n in names:
            if not isinstance(n, str):
                raise ValueError(f"Mix: source names must be strings, got {n!r}")
        self.sources: Dict[str, List[str]] = {n: _specs(n, sources[n]) for n in names}
        w = _per_source("weights", weights, names)
        if w and len(w) != len(names):
            missing = [n for n in names if n not in w]
            raise ValueError(f"Mix: weights must give every source a weight (or be None); {missing[0]!r} has none")
        for n, v in w.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"Mix: the weight of {n!r} must be a number, got {v!r}")
        self.weights: Optional[Dict[str, float]] = {n: float(w[n]) for n in names} if w else None
        if samples_per_epoch is not None and (isinstance(samples_per_epoch, bool)
                                              or not isinstance(samples_per_epoch, int) or samples_per_epoch < 1):
            raise ValueError(f"Mix: samples_per_epoch must be an integer >= 1 (or None), got {samples_per_epoch!r}")
        self.samples_per_epoch = samples_per_epoch
        self.label_offset: Dict[str, int] = _per_source("label_offset", label_offset, names)
        for n, v in self.label_offset.items():
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"Mix: label_offset of {n!r} must be an integer, got {v!r}")
        self.label_map: Dict[str, Dict[int, int]] = {}
        for n, m in _per_source("label_map", label_map, names).items():
            if not isinstance(m, Mapping) or not all(isinstance(k, int) and isinstance(v, int) and
                                                     not isinstance(k, bool) and not isinstance(v, bool)
                                                     for k, v in m.items()):
                raise ValueError(f"Mix: label_map of {n!r} must be a dict of int -> int, got {m!r}")
            self.label_map[n] = dict(m)

    def _json(self) -> str:
        """The mixture as the C++ codec reads it (include/stoker/mixture.h)."""
        out = []
        for n, specs in self.sources.items():
            out.append({"name": n, "specs": specs,
                        "weight": self.weights[n] if self.weights else None,
                        "label_offset": self.label_offset.get(n, 0),
                        "label_map": sorted([k, v] for k, v in self.label_map.get(n, {}).items())})
        return json.dumps({"sources": out, "samples_per_epoch": self.samples_per_epoch or 0})

    def __repr__(self) -> str:
        args: List[Tuple[str, Any]] = [("weights", self.weights), ("samples_per_epoch", self.samples_per_epoch),
                                       ("label_offset", self.label_offset or None),
                                       ("label_map", self.label_map or None)]
        rest = "".join(f", {k}={v!r}" for k, v in args if v is not None)
        return f"Mix({self.sources!r}{rest})"
