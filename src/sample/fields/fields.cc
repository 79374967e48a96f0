// The table of field kinds, found by kind, and what every kind shares.
#include <string>
#include <string_view>
#include <vector>

#include "sample/fields/field.h"

namespace stoker::detail {

// Each kind's definition, in its own file (image.cc, mask.cc, ...).
extern const FieldDef kImageDef, kMaskDef, kBoxesDef, kLabelDef, kTensorDef, kVolumeDef, kLabelVolumeDef, kBytesDef;

const std::vector<const FieldDef*>& field_defs() {
  // In FieldKind's order (tests/sample/fields_test.cc checks it).
  static const std::vector<const FieldDef*> defs = {&kImageDef,  &kMaskDef,   &kBoxesDef,      &kLabelDef,
                                                    &kTensorDef, &kVolumeDef, &kLabelVolumeDef, &kBytesDef};
  return defs;
}

const FieldDef& field_def(FieldKind k) { return *field_defs()[static_cast<std::size_t>(k)]; }

const FieldDef* field_def(const std::string& name) {
  for (const FieldDef* d : field_defs()) {
    if (name == d->name) return d;
  }
  return nullptr;
}

std::string field_kind_names() {
  std::string s;
  for (const FieldDef* d : field_defs()) s += (s.empty() ? "" : ", ") + std::string(d->name);
  return s;
}

std::string field_doc(const FieldDef& d) {
  static constexpr std::string_view kMark = "<common sections>\n";
  static constexpr std::string_view kCommon = R"doc(Attributes:
    name (str), member (str or None): as given.

Raises:
    ValueError: ``name`` or ``member`` is not a str. The schema's rules
        (names unique in the batch, at most one Image, Mask and Boxes
        only beside an Image, parameters in range) are checked by
        stoker.Loader, which raises ValueError naming the field.
)doc";
  std::string doc = d.doc;
  if (const auto at = doc.find(kMark); at != std::string::npos) doc.replace(at, kMark.size(), kCommon);
  return doc;
}

std::string field_name(const FieldSpec& f) {
  std::string s = "field '" + f.field.name + "'";
  if (f.folder) {
    s += " (paired folder '" + f.folder->root() + "')";
  } else if (!f.primary && f.part >= 0) {
    s += " (member '" + f.field.member + (f.field.member.empty() ? f.member : "") + "')";
  }
  return s;
}

Status read_field(const Source& source, const FieldSpec& f, std::size_t rec, std::vector<std::uint8_t>* out) {
  if (f.primary) return source.read(rec, out);
  if (f.folder) return f.folder->read(source.relative_key(rec), out);
  return source.read_member(rec, f.member, out);
}

void FieldSetup::add_output(std::string name, std::string descr, std::vector<std::int64_t> dims, std::size_t item,
                            int per_record, bool own) {
  OutputSpec o{std::move(name), std::move(descr), std::move(dims), item * static_cast<std::size_t>(per_record), 0,
               per_record};
  for (auto d : o.dims) o.bytes *= static_cast<std::size_t>(d);
  if (own) field.output = static_cast<int>(spec.outputs.size());
  spec.outputs.push_back(std::move(o));
}

Status FieldOp::store(const Sample& x, FieldScratch*, std::vector<std::uint8_t>* out) const {
  const auto [bytes, n] = x.bytes(f_);
  out->insert(out->end(), bytes, bytes + n);
  return Status::Ok();
}

std::uint64_t FieldOp::scratch_estimate(const std::uint8_t* /*bytes*/, std::size_t n) const {
  return 2 * (n + (f_.output >= 0 ? output().bytes : 0));
}

std::string FieldOp::what() const { return field_name(f_) + " (" + field_def(f_.field.kind).name + ")"; }

}  // namespace stoker::detail
