// The folders under src/ are layers: each may include its own headers, the
// public ones (stoker/) and the layers listed for it below, nothing else. The
// table is the architecture the folder READMEs describe (docs/design); a new
// dependency is a decision, made here, not a side effect of an #include.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

namespace {

// What each lower layer may include besides itself and stoker/. The upper
// layers (sample, batch, pack, options) assemble the others and are not listed.
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> kAllowed = {
      {"util", {}},
      {"image", {}},
      {"order", {"util"}},
      {"stats", {"memory", "util"}},  // the accounts' names (memory_account_name)
      {"memory", {"util"}},
      {"decode", {"image", "util"}},
      {"source", {"decode", "memory", "order", "util"}},
      {"transform", {"decode", "image", "order", "util"}},
      {"cache", {"decode", "image", "memory", "util"}},
  };
  return kAllowed;
}

// The folder an include names ("cache" for "cache/arena.h"; "" for a file
// beside the includer or a system header).
std::string included_folder(const std::string& line) {
  const std::string prefix = "#include \"";
  if (line.rfind(prefix, 0) != 0) return "";
  const std::size_t start = prefix.size(), slash = line.find('/', start), end = line.find('"', start);
  if (slash == std::string::npos || slash > end) return "";
  return line.substr(start, slash - start);
}

TEST(LayeringTest, EachLayerIncludesOnlyTheLayersBelowIt) {
  const std::filesystem::path src = std::filesystem::path(STOKER_SOURCE_DIR) / "src";
  int files = 0;
  for (const auto& [layer, below] : allowed()) {
    const std::filesystem::path root = src / layer;
    ASSERT_TRUE(std::filesystem::is_directory(root)) << root;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
      if (!e.is_regular_file()) continue;
      std::ifstream in(e.path());
      std::string line;
      int n = 0;
      while (std::getline(in, line)) {
        ++n;
        const std::string dep = included_folder(line);
        if (dep.empty() || dep == layer || dep == "stoker") continue;
        EXPECT_TRUE(below.count(dep)) << e.path().string() << ":" << n << ": " << layer << "/ includes " << dep
                                      << "/: " << line;
      }
      ++files;
    }
  }
  EXPECT_GT(files, 60);
}

TEST(LayeringTest, IncludedFolderIsReadFromTheIncludeLine) {
  EXPECT_EQ(included_folder("#include \"cache/arena.h\""), "cache");
  EXPECT_EQ(included_folder("#include \"transform/volume/ops.h\""), "transform");
  EXPECT_EQ(included_folder("#include \"local.h\""), "");
  EXPECT_EQ(included_folder("#include <vector>"), "");
}

}  // namespace
