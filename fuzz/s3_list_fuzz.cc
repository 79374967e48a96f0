// libFuzzer: S3's ListObjectsV2 XML (parse_s3_list) and error bodies
// (parse_s3_error), then the listed keys through the glob filter a
// s3://bucket/prefix/*.tar spec applies (s3_key_matches), with the input's
// first line as the pattern (also through parse_s3_url and s3_glob_prefix).
// These parsers return Status and never throw.
#include <cstdint>
#include <string>
#include <string_view>

#include "source/remote/s3.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stoker::detail;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  S3ListPage page;
  const stoker::Status st = parse_s3_list(text, &page);
  const std::string err = parse_s3_error(text);
  if (err.size() > text.size() + 5) __builtin_trap();  // "code: message..." is made of the body's bytes
  if (!st.ok()) return 0;
  // What the lister relies on: a truncated page names the next one, every object has a key and an ETag.
  if (page.truncated && page.next_token.empty()) __builtin_trap();
  const std::string_view line = text.substr(0, text.find('\n'));
  S3Url url;
  const std::string spec = "s3://bucket/" + std::string(line.substr(0, 200));
  std::string pattern = "train/*.tar";
  if (parse_s3_url(spec, &url, true).ok()) pattern = url.key;
  const std::string prefix = s3_glob_prefix(pattern);
  if (pattern.compare(0, prefix.size(), prefix) != 0) __builtin_trap();  // the prefix is the pattern's start
  for (const S3Object& o : page.objects) {
    if (o.key.empty() || o.etag.empty()) __builtin_trap();
    (void)s3_key_matches(pattern, o.key);
  }
  return 0;
}
