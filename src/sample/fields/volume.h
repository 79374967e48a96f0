// The Volume kind's geometry, as its followers (LabelVolume) apply it: the
// Volume field opens every volume field of the record in hand (a label's
// foreground index is part of its plan), checks them against its own, and
// plans the patches; each field then cuts its patches with its own kernel.
#pragma once

#include <memory>
#include <vector>

#include "sample/fields/field.h"
#include "sample/volume_store.h"
#include "transform/volume/ops.h"

namespace stoker::detail {

// A volume sample's plan.
struct VolumePatches {
  std::vector<PatchPlan> plans;            // patch p's, drawn from (seed, epoch, draw, p)
  std::vector<VolumeStore::Opened> open;  // by schema position: each volume field's voxels
};

// The Volume field, as its followers reach it.
class VolumeOwner : public FieldOp {
 public:
  using FieldOp::FieldOp;
  virtual const VolumeProgram& program() const = 0;
  virtual const VolumeStore& volume_store() const = 0;
  // What the first readable record said of the field at schema position i.
  virtual int channels(int i) const = 0;
  virtual bool labels_u8(int i) const = 0;
};

}  // namespace stoker::detail
