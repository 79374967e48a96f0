// A field kind's one definition (FieldDef), found by kind as a transform's
// Def<T> is (transform/transform_defs.h): its name, its docstring (its
// Python class's __doc__), where its fields stand in the sample's geometry,
// what it reads when no member is named, its parameters and their checks,
// and the function that makes a schema's field of the kind (fields/field.h:
// a FieldOp, with its outputs declared from the first records, its live
// path, its cache="decoded" store form and its scratch). Each kind is one file in this folder (image.cc, mask.cc, ...);
// the table (fields.cc) lists them in FieldKind's order.
//
// This header is the light half: what the options codec and the schema
// checks (options/options.cc) read.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stoker/fields.h"

namespace stoker::detail {

class FieldOp;
struct FieldSetup;

// Where a kind's fields stand in the sample's geometry.
enum class Role : std::uint8_t {
  kOwner,     // opens its reference and plans the sample's geometry from (seed, epoch, record):
              // Image (2D), Volume (3D); at most one of each per schema
  kFollower,  // applies its owner's plan with its own kernel: Mask, Boxes (the Image's), LabelVolume (the Volume's)
  kFree,      // no geometry: Label, Tensor
};

// What a kind's field reads when it names no member.
enum class DefaultMember : std::uint8_t {
  kRecord,   // the record itself (Source::read): an image, a volume
  kOwnName,  // the member named as the field
  kNone,     // nothing: a label is then the source's
};

struct FieldDef {
  FieldKind kind;
  const char* name;  // as the options JSON and Python name it: "label_volume"
  // The docstring of its Python class (stoker.LabelVolume's __doc__), in
  // Google style; a "<common sections>" line stands for the Attributes and
  // Raises every kind shares (field_doc() puts them in).
  const char* doc;
  Role role;
  FieldKind follows;  // kFollower: its owner's kind (else its own)
  // kFollower: why it cannot stand without its owner, after "field 'x' (kind) ".
  const char* without_owner;
  DefaultMember member;
  bool json_member;   // "json:<key>" names a key of the record's .json member (labels, boxes)
  bool folder;        // may be read from a paired folder (Field::folder)
  bool in_volumes;    // may stand in a volume schema (the Volume's kinds, and Label)
  bool reads_itself;  // reads its own bytes (a volume: mapped, inflated, cached), not a part the maker reads
  // The Field parameters it takes besides name, member and folder, by their
  // JSON keys ("fill"; the options codec carries them); null: none.
  std::array<const char*, 3> params;
  std::array<const char*, 2> suffixes;  // the batch keys it adds besides its name (name + suffix); null: none
  // Throws Error(kInvalidArgument) for a parameter out of range; `what`
  // names the field ("field 'seg' (mask)"). May be null.
  void (*check)(const Field& f, const std::string& what);
  // Makes a schema's field of the kind, reading the first records where its
  // dtype or shape is needed. Throws Error(kInvalidArgument).
  std::unique_ptr<FieldOp> (*make)(FieldSetup& setup);
};

// The definition of kind k.
const FieldDef& field_def(FieldKind k);
// The definition named `name`, or null.
const FieldDef* field_def(const std::string& name);
// Every kind's, in FieldKind's order.
const std::vector<const FieldDef*>& field_defs();
// "image, mask, boxes, ...": the kinds' names, for messages.
std::string field_kind_names();
// The kind's docstring: FieldDef::doc with the shared sections put in.
std::string field_doc(const FieldDef& d);

}  // namespace stoker::detail
