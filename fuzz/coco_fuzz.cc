// libFuzzer: the COCO instances JSON reader (open_coco, which takes a path:
// each input is written to one file in a tmpfs folder made once), then
// every record's members as a Boxes field reads them (parse_boxes). The
// input's size picks skip_empty and keep_crowd, so seeds stay plain JSON.
// open_coco documents stoker::Error for a bad file; anything else escaping
// it is a finding.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "stoker/source.h"
#include "stoker/status.h"
#include "transform/boxes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const stoker_fuzz::ScratchDir dir;
  const std::string path = dir.write("instances.json", data, size);
  stoker::CocoOptions options;
  options.skip_empty = (size & 1) != 0;
  options.keep_crowd = (size & 2) != 0;
  std::unique_ptr<stoker::Source> source;
  try {
    source = stoker::open_coco(path, options);
  } catch (const stoker::Error&) {
    return 0;
  }
  if (source->size() == 0) __builtin_trap();  // documented: "no images" is an error
  (void)source->describe();
  std::vector<std::uint8_t> member;
  std::vector<stoker::detail::BoxRow> boxes;
  for (std::size_t i = 0; i < source->size() && i < 256; ++i) {
    (void)source->key(i);
    (void)source->relative_key(i);
    if (source->label(i) != -1) __builtin_trap();
    for (const std::string& m : source->members(i)) {
      const stoker::Status st = source->read_member(i, m, &member);
      if (m == "image_id" && !st.ok()) __builtin_trap();
      if (m == "boxes" && st.ok()) {
        // The member is what a Boxes field of any format parses.
        (void)stoker::detail::parse_boxes(member.data(), member.size(), stoker::BoxFormat::kXYXY, "", &boxes);
      }
    }
    if (source->read_member(i, "nope", &member).ok()) __builtin_trap();
  }
  return 0;
}
