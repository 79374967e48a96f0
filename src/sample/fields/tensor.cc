// Tensor: any numeric .npy batched as it is; every record must have the
// dtype and shape of the first readable record's. Also the default schema's
// arrays (the record itself).
#include <algorithm>
#include <cstring>

#include "decode/formats.h"
#include "decode/npy.h"
#include "sample/fields/field.h"

namespace stoker::detail {
namespace {

// Records read at construction to learn the dtype and shape.
constexpr std::size_t kProbeRecords = 16;

std::string dims_text(const std::vector<std::int64_t>& d) {
  std::string s = "(";
  for (auto x : d) s += std::to_string(x) + ",";
  return s + ")";
}

class TensorFieldOp final : public FieldOp {
 public:
  explicit TensorFieldOp(FieldSetup& setup) : FieldOp(setup) {
    probe_first(kProbeRecords, "dtype and shape", [&](const std::vector<std::uint8_t>& bytes) {
      NpyHeader h;
      Status st = sniff_format(bytes.data(), bytes.size()) == Format::kNpy
                      ? parse_npy_header(bytes.data(), bytes.size(), &h)
                      : Status::Unsupported("not a .npy array");
      if (st.ok() && h.fortran_order) st = Status::Unsupported(".npy in Fortran order");
      if (st.ok()) {
        descr_ = h.descr;
        item_ = h.item_size;
        dims_.assign(h.shape.begin(), h.shape.end());
      }
      return st;
    });
  }
  void declare(FieldSetup& setup) override { setup.add_output(f_.field.name, descr_, dims_, item_); }

  // Checked against the batch's dtype and shape, copied as is.
  Status apply(const Sample& x, FieldScratch*) const override {
    const auto [data, size] = x.bytes(f_);
    const OutputSpec& o = output();
    NpyHeader h;
    Status st = sniff_format(data, size) == Format::kNpy ? parse_npy_header(data, size, &h)
                                                          : Status::Corrupt("not a .npy array (the samples are arrays)");
    if (st.ok() && (h.descr != o.descr || h.fortran_order ||
                    !std::equal(h.shape.begin(), h.shape.end(), o.dims.begin(), o.dims.end(),
                                [](std::uint64_t a, std::int64_t b) { return static_cast<std::int64_t>(a) == b; }))) {
      std::vector<std::int64_t> got(h.shape.begin(), h.shape.end());
      st = Status::Unsupported("array of dtype " + h.descr + " shape " + dims_text(got) +
                               " differs from the batch's dtype " + o.descr + " shape " + dims_text(o.dims));
    }
    if (st.ok()) std::memcpy(dest(x.out), data + h.data_offset, o.bytes);
    return st;
  }

 private:
  std::string descr_;
  std::vector<std::int64_t> dims_;
  std::size_t item_ = 0;
};

}  // namespace

extern const FieldDef kTensorDef;
const FieldDef kTensorDef{
    .kind = FieldKind::kTensor,
    .name = "tensor",
    .doc = R"doc(A .npy member batched as it is: [B, ...] of record 0's dtype and shape.

Any numeric dtype; no transform applies. A record whose array has another
dtype or shape than record 0's, or lacks the member, is a sample error
under ``on_corrupt``.

Args:
    name (str): its key in the batch.
    member (str, optional): the list file column or shard member suffix
        it is read from. Default None: the one named ``name``.
    folder (str or os.PathLike, optional): a paired folder of .npy
        files, matched as Mask's ``folder``. Default None.

<common sections>

Example:
    >>> loader = stoker.Loader("data/train-{000000..000003}.tar", batch_size=8,
    ...                        transforms=[stoker.CenterCrop(224)],
    ...                        fields=[stoker.Image(), stoker.Tensor("features")])
    >>> next(iter(loader))["features"].shape
    torch.Size([8, 512]))doc",
    .role = Role::kFree,
    .follows = FieldKind::kTensor,
    .without_owner = nullptr,
    .member = DefaultMember::kOwnName,
    .json_member = false,
    .folder = true,
    .in_volumes = false,
    .reads_itself = false,
    .params = {},
    .suffixes = {},
    .check = nullptr,
    .make = [](FieldSetup& s) -> std::unique_ptr<FieldOp> { return std::make_unique<TensorFieldOp>(s); },
};

}  // namespace stoker::detail
