// Bytes: a member's bytes as they are (a caption, a token string, any
// blob), batched uint8 [N, max_bytes] zero padded, with <name>_length int64
// [N]. No geometry, no transform; a member longer than max_bytes is a sample
// error. Its cache="decoded" stored form is its bytes as read.
#include <cstring>

#include "sample/fields/field.h"

namespace stoker::detail {
namespace {

class BytesFieldOp final : public FieldOp {
 public:
  explicit BytesFieldOp(FieldSetup& setup) : FieldOp(setup) {}
  void declare(FieldSetup& setup) override {
    setup.add_output(f_.field.name, "|u1", {f_.field.max_bytes}, 1);
    setup.add_output(f_.field.name + "_length", "<i8", {}, 8, 1, /*own=*/false);
  }
  Status apply(const Sample& x, FieldScratch*) const override {
    const auto [bytes, n] = x.bytes(f_);
    const auto max = static_cast<std::size_t>(f_.field.max_bytes);
    if (n > max) {
      return Status::Unsupported("the member has " + std::to_string(n) + " bytes, more than max_bytes=" +
                                 std::to_string(max));
    }
    std::uint8_t* row = dest(x.out);
    if (n) std::memcpy(row, bytes, n);
    std::memset(row + n, 0, max - n);
    const auto length = static_cast<std::int64_t>(n);
    std::memcpy(dest(x.out, 1), &length, sizeof length);
    return Status::Ok();
  }
};

void check_bytes(const Field& f, const std::string& what) {
  if (f.max_bytes < 1) invalid(what + ": max_bytes must be >= 1, got " + std::to_string(f.max_bytes));
}

}  // namespace

extern const FieldDef kBytesDef;
const FieldDef kBytesDef{
    .kind = FieldKind::kBytes,
    .name = "bytes",
    .doc = R"doc(A member's bytes as they are (a caption, a token string, any blob): uint8 [B, max_bytes].

No transform applies; the bytes are zero padded to ``max_bytes``, and
``<name>_length`` int64 [B] holds each member's size, so
``bytes(batch[name][i, :batch[name + "_length"][i]])`` is record i's
member (``.decode()`` for text). A member longer than ``max_bytes``, or
missing, is a sample error under ``on_corrupt``.

Args:
    name (str): its key in the batch (with ``<name>_length``).
    max_bytes (int): the row of the padded tensor, >= 1. Default 256.
    member (str, optional): the list file column or shard member suffix
        it is read from. Default None: the one named ``name``.
    folder (str or os.PathLike, optional): a paired folder of files,
        matched as Mask's ``folder``. Default None.

<common sections>

Example:
    >>> loader = stoker.Loader("data/captions-{000000..000003}.tar", batch_size=8,
    ...                        transforms=[stoker.CenterCrop(224)],
    ...                        fields=[stoker.Image(), stoker.Bytes("txt", max_bytes=128)])
    >>> batch = next(iter(loader))
    >>> batch["txt"].shape, batch["txt_length"].shape
    (torch.Size([8, 128]), torch.Size([8])))doc",
    .role = Role::kFree,
    .follows = FieldKind::kBytes,
    .without_owner = nullptr,
    .member = DefaultMember::kOwnName,
    .json_member = false,
    .folder = true,
    .in_volumes = false,
    .reads_itself = false,
    .params = {"max_bytes"},
    .suffixes = {"_length"},
    .check = check_bytes,
    .make = [](FieldSetup& s) -> std::unique_ptr<FieldOp> { return std::make_unique<BytesFieldOp>(s); },
};

}  // namespace stoker::detail
