// The sample schema: what one sample of a batch is, as an ordered list of
// named fields. Each field has a kind, the record member it comes from, and
// the batch tensors it fills (its name is their key).
//
//   LoaderOptions opt;
//   opt.fields = {ImageField("image"), MaskField("mask", /*fill=*/255)};
//
// An empty list is the default schema: {ImageField("image"),
// LabelField("label")} (or, for .npy arrays that are not images,
// {TensorField("array"), LabelField("label")}), whose batches are today's
// images and labels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stoker {

enum class FieldKind {
  kImage,   // decoded to RGB8; geometry with Pillow's bilinear; photometric
            // transforms and Normalize apply. dtype/layout as the options say.
            // At most one per schema: the reference of every spatial field.
            // With channels/dtype kStored: a raster kept as stored (below).
  kMask,    // decoded as stored (8-bit gray or palette indices, or 16-bit),
            // never converted to RGB; geometry with Pillow's NEAREST; padded
            // with `fill`. Batched [N, H, W] uint8 (8-bit) or int32 (16-bit,
            // as record 0's mask). Its size must equal its image's.
  kBoxes,   // float32 [n, 4] in `format`, in the image's pixels: they follow
            // the geometry, are clipped to the canvas, and those under 1 px
            // wide or high afterwards are dropped (counted). Batched as
            // <name> float32 [N, max_boxes, 4] (zero padded), <name>_labels
            // int64 [N, max_boxes] (per-box class ids, -1 padded or when the
            // member has none) and <name>_count int64 [N].
  kLabel,   // int64 scalar: the source's label (folder class, list column,
            // .cls / json:<field> of shards), or a member holding an integer.
  kTensor,  // any numeric .npy, batched as is: every record must have record
            // 0's dtype and shape.
  kVolume,  // a 3D scan (.npy, NIfTI-1/2 .nii, gzipped .nii.gz), (S0, S1, S2)
            // or channels first (C, S0, S1, S2) (NIfTI: nibabel's axis
            // order, its 4th dim the channels), any numeric dtype, NIfTI
            // scaling applied: intensity. Cut into patches by
            // LoaderOptions::volume_transforms (stoker/volume.h) without
            // reading the whole volume; batched float32 [N*n, C, P0, P1, P2]
            // (n patches per volume, consecutive), with <name>_start int64
            // [N*n, 3] (the patch's first voxel in the volume) and
            // <name>_affine float64 [N*n, 4, 4] (voxel to world, the volume's
            // affine moved to the patch). At most one per schema: the
            // reference of the label volumes. Not with images, masks, boxes.
  kLabelVolume,  // a label volume paired with the kVolume: the same spatial
                 // shape, integer values never scaled, nearest geometry,
                 // padded with `fill`; [N*n, C, P0, P1, P2] uint8 when record
                 // 0's is uint8, else int32.
  kBytes,  // a member's bytes as they are (a caption, a token string, any
           // blob): uint8 [N, max_bytes] zero padded, with <name>_length
           // int64 [N]. No transform applies.
};

// kImage: what its pixels are. kRgb: RGB, 3 channels (PIL's convert("RGB")).
// kStored: the channels the file stores (1..N: a 13-band TIFF, a gray JPEG,
// an RGBA PNG), every record with record 0's count.
enum class ImageChannels { kRgb, kStored };
// kImage: its sample type. kUint8: 8 bits (16-bit samples reduced, as PIL
// converts them). kStored: the file's (uint8, uint16, float32), every record
// with record 0's.
enum class ImageDType { kUint8, kStored };

// Coordinates of a box, as torchvision's BoundingBoxFormat names them.
enum class BoxFormat { kXYXY, kXYWH, kCXCYWH };

struct Field {
  // Its key in the batch. Non-empty, unique in the schema.
  std::string name;
  FieldKind kind = FieldKind::kImage;
  // The record member it is read from: a list file's column, a shard's
  // member suffix ("seg.png", or "seg" for the one member "seg.<ext>"),
  // "json:<key>" for a field of the record's .json member (labels and boxes).
  // Empty (the default): images, volumes and labels come from the record
  // itself (its image or volume, and its label); masks, boxes, tensors and
  // label volumes from the member named as the field.
  std::string member;
  // kMask, kBoxes, kTensor, kVolume, kLabelVolume: a paired folder: the member is the file under
  // this folder whose path relative to it, without its extension, is the
  // record's (Source::relative_key) without its own ("data/seg/masks" for
  // images "data/seg/images/a/b.jpg" of folder "data/seg/images" ->
  // "data/seg/masks/a/b.png"), as VOC/ADE20K/Cityscapes-style trees pair
  // them. Empty (the default): `member`. Not with `member`.
  std::string folder{};
  // kMask, kLabelVolume: the value of pixels padded outside the image
  // (0..65535). Default 0.
  int fill = 0;
  // kBoxes: rows of the padded batch tensor; more boxes are dropped and
  // counted. Default 100. REQUIRES: >= 1.
  int max_boxes = 100;
  // kBoxes: the format of the boxes in the member and in the batch. Default xyxy.
  BoxFormat format = BoxFormat::kXYXY;
  // kBytes: the row of the padded batch tensor; a longer member is a sample
  // error. Default 256. REQUIRES: >= 1.
  int max_bytes = 256;  // kImage: kStored keeps the stored channels and sample type (both or
  // neither): batched [N, C, H, W] (or NHWC) of uint8, int32 (uint16 samples:
  // torch has no uint16) or float32, or float32 after Normalize (any C
  // values); geometry per channel (src/transform/raster.h). Colour-only
  // transforms are refused. Default kRgb / kUint8.
  ImageChannels channels = ImageChannels::kRgb;
  ImageDType dtype = ImageDType::kUint8;
};

inline Field ImageField(std::string name, std::string member = "") {
  return {std::move(name), FieldKind::kImage, std::move(member)};
}
// A raster kept as stored (ImageChannels::kStored, ImageDType::kStored).
inline Field StoredImageField(std::string name, std::string member = "") {
  Field f{std::move(name), FieldKind::kImage, std::move(member)};
  f.channels = ImageChannels::kStored;
  f.dtype = ImageDType::kStored;
  return f;
}
inline Field MaskField(std::string name, int fill = 0, std::string member = "") {
  Field f{std::move(name), FieldKind::kMask, std::move(member)};
  f.fill = fill;
  return f;
}
inline Field BoxesField(std::string name, int max_boxes = 100, BoxFormat format = BoxFormat::kXYXY,
                        std::string member = "") {
  Field f{std::move(name), FieldKind::kBoxes, std::move(member)};
  f.max_boxes = max_boxes;
  f.format = format;
  return f;
}
inline Field LabelField(std::string name, std::string member = "") {
  return {std::move(name), FieldKind::kLabel, std::move(member)};
}
inline Field TensorField(std::string name, std::string member = "") {
  return {std::move(name), FieldKind::kTensor, std::move(member)};
}
inline Field VolumeField(std::string name, std::string member = "") {
  return {std::move(name), FieldKind::kVolume, std::move(member)};
}
inline Field BytesField(std::string name, int max_bytes = 256, std::string member = "") {
  Field f{std::move(name), FieldKind::kBytes, std::move(member)};
  f.max_bytes = max_bytes;
  return f;
}
inline Field LabelVolumeField(std::string name, std::string member = "", int fill = 0) {
  Field f{std::move(name), FieldKind::kLabelVolume, std::move(member)};
  f.fill = fill;
  return f;
}

}  // namespace stoker
