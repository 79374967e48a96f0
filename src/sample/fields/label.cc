// Label: an int64 scalar per sample: the source's label, or the integer a
// member holds ("7\n", a list file's column, json:<key> of the .json
// member). In a volume schema, one per patch.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

#include "sample/fields/field.h"

namespace stoker::detail {
namespace {

// An integer label held by a member: its text ("7\n", a .cls member or a
// list file's column), or a JSON member's field.
Status parse_label(const std::uint8_t* data, std::size_t size, const std::string& json_key, std::int64_t* out) {
  if (!json_key.empty()) {
    const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Status::Corrupt("not a JSON object");
    auto it = j.find(json_key);
    if (it == j.end()) return Status::NotFound("the JSON has no key '" + json_key + "'");
    if (!it->is_number_integer()) return Status::Corrupt("'" + json_key + "' is not an integer: " + it->dump());
    *out = it->get<std::int64_t>();
    return Status::Ok();
  }
  std::size_t b = 0, e = size;
  while (b < e && std::isspace(data[b])) ++b;
  while (e > b && std::isspace(data[e - 1])) --e;
  const char* first = reinterpret_cast<const char*>(data) + b;
  const char* last = reinterpret_cast<const char*>(data) + e;
  auto [p, ec] = std::from_chars(first, last, *out);
  if (ec != std::errc() || p != last || b == e) {
    return Status::Corrupt("not an integer: '" + std::string(first, std::min<std::size_t>(e - b, 40)) + "'");
  }
  return Status::Ok();
}

class LabelFieldOp final : public FieldOp {
 public:
  explicit LabelFieldOp(FieldSetup& setup) : FieldOp(setup) {
    if (setup.owner && setup.owner->spec().field.kind == FieldKind::kVolume && f_.part >= 0) {
      invalid("field '" + f_.field.name + "' (label): with volumes, a Label is the source's label (no member=)");
    }
  }
  void declare(FieldSetup& setup) override {
    if (setup.spec.label_output < 0) setup.spec.label_output = static_cast<int>(setup.spec.outputs.size());
    setup.add_output(f_.field.name, "<i8", {}, 8, setup.owner ? setup.owner->entries() : 1);
  }
  Status apply(const Sample& x, FieldScratch*) const override {
    std::int64_t label = 0;
    if (f_.part < 0) {
      label = source_.label(x.rec);
    } else {
      const auto [bytes, n] = x.bytes(f_);
      Status st = parse_label(bytes, n, f_.json_key, &label);
      if (!st.ok()) return st;
    }
    write(x.out, label);
    return Status::Ok();
  }
  void fail(SampleOut out) const override { write(out, -1); }

 private:
  void write(SampleOut out, std::int64_t label) const {
    std::uint8_t* d = dest(out);
    for (int e = 0; e < output().per_record; ++e) std::memcpy(d + e * sizeof label, &label, sizeof label);
  }
};

}  // namespace

extern const FieldDef kLabelDef;
const FieldDef kLabelDef{
    .kind = FieldKind::kLabel,
    .name = "label",
    .doc = R"doc(An int64 label: [B].

The source's label (an ImageFolder's class index, a list file's ``label``
column, a shard's .cls member or the loader's ``labels="json:<key>"``),
or with ``member`` the integer a member holds.

Args:
    name (str): its key in the batch. Default "label".
    member (str, optional): a list file column or shard member suffix
        holding an integer, or "json:<key>", a key of the record's .json
        member. Default None: the source's label.

<common sections>

Example:
    >>> loader = stoker.Loader("data/train", batch_size=8, transforms=[stoker.CenterCrop(224)],
    ...                        fields=[stoker.Image(), stoker.Label("target")])
    >>> next(iter(loader))["target"].dtype
    torch.int64)doc",
    .role = Role::kFree,
    .follows = FieldKind::kLabel,
    .without_owner = nullptr,
    .member = DefaultMember::kNone,
    .json_member = true,
    .folder = false,
    .in_volumes = true,
    .reads_itself = false,
    .params = {},
    .suffixes = {},
    .check = nullptr,
    .make = [](FieldSetup& s) -> std::unique_ptr<FieldOp> { return std::make_unique<LabelFieldOp>(s); },
};

}  // namespace stoker::detail
