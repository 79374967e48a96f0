// A list file: `path,label` lines, or CSV whose header row names columns
// (`image,mask,label`), parsed into a file list (file_list_source.h).
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "source/file_list_source.h"
#include "source/file_reader.h"
#include "source/list_file.h"
#include "stoker/source.h"

namespace fs = std::filesystem;

namespace stoker {
namespace {

constexpr const char* kSpace = " \t\r\n";

std::string trim(std::string_view s) {
  std::size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return "";
  std::size_t e = s.find_last_not_of(kSpace);
  return std::string(s.substr(b, e - b + 1));
}

// A label: a non-negative decimal integer, nothing else.
bool parse_label(const std::string& s, std::int64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && *v >= 0;
}

// A value cell: any decimal integer.
bool is_integer(const std::string& s) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

// Splits one line into CSV cells: comma separated, spaces around a cell
// trimmed; a cell that starts with '"' is quoted (commas kept, "" is a
// quote). False, with *err, on an unterminated quote or text after one.
bool split_csv(std::string_view line, std::vector<std::string>* cells, std::string* err) {
  cells->clear();
  std::size_t i = 0;
  const std::size_t n = line.size();
  auto skip_space = [&] {
    while (i < n && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
  };
  for (;;) {
    skip_space();
    std::string cell;
    if (i < n && line[i] == '"') {
      bool closed = false;
      for (++i; i < n; ++i) {
        if (line[i] != '"') {
          cell += line[i];
        } else if (i + 1 < n && line[i + 1] == '"') {
          cell += '"';
          ++i;
        } else {
          closed = true;
          ++i;
          break;
        }
      }
      if (!closed) {
        *err = "unterminated quote in cell " + std::to_string(cells->size() + 1);
        return false;
      }
      skip_space();
      if (i < n && line[i] != ',') {
        *err = "text after the closing quote of cell " + std::to_string(cells->size() + 1);
        return false;
      }
    } else {
      std::size_t e = line.find(',', i);
      if (e == std::string_view::npos) e = n;
      cell = trim(line.substr(i, e - i));
      i = e;
    }
    cells->push_back(std::move(cell));
    if (i >= n) return true;
    ++i;  // the comma
  }
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

namespace detail {

Status parse_list(const std::string& text, const std::string& name, const std::string& base,
                  std::vector<std::string>* paths, std::vector<std::int64_t>* labels, ListColumns* columns) {
  // kStart: before the first line; kAfterHeader: a header of two columns (or
  // a malformed one) was read, the first row decides; kLegacy: `path,label`
  // rows; kNamed: CSV rows under a header naming the columns.
  enum class Mode { kStart, kAfterHeader, kLegacy, kNamed } mode = Mode::kStart;
  std::vector<std::string> header;       // the header's cells, when it parsed as CSV
  std::size_t primary = 0;               // kNamed: the path column
  std::size_t label_col = SIZE_MAX;      // kNamed: the label column, SIZE_MAX when none
  std::vector<std::size_t> member_cols;  // kNamed: the other columns
  std::vector<std::string> cells;        // kNamed: member cells, row-major
  std::vector<std::string> row;
  std::string err;
  std::size_t lineno = 0, start = 0, header_line = 0;
  auto where = [&](std::size_t line = 0) { return name + ":" + std::to_string(line ? line : lineno) + ": "; };
  auto resolve = [&](const std::string& p) {
    return fs::path(p).is_absolute() || base.empty() ? p : (fs::path(base) / p).string();
  };
  auto name_columns = [&]() -> Status {
    for (std::size_t c = 0; c < header.size(); ++c) {
      if (header[c].empty()) {
        return Status::InvalidArgument(where(header_line) + "header column " + std::to_string(c + 1) + " has no name");
      }
      for (std::size_t d = 0; d < c; ++d) {
        if (header[d] == header[c]) {
          return Status::InvalidArgument(where(header_line) + "header names column '" + header[c] + "' twice");
        }
      }
    }
    std::size_t image = SIZE_MAX, path = SIZE_MAX, first = SIZE_MAX;
    for (std::size_t c = 0; c < header.size(); ++c) {
      if (header[c] == "image") image = c;
      if (header[c] == "path") path = c;
      if (header[c] == "label") {
        label_col = c;
      } else if (first == SIZE_MAX) {
        first = c;
      }
    }
    primary = image != SIZE_MAX ? image : path != SIZE_MAX ? path : first;
    for (std::size_t c = 0; c < header.size(); ++c) {
      if (c != primary && c != label_col) member_cols.push_back(c);
    }
    return Status::Ok();
  };
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string t = trim(std::string_view(text).substr(start, end - start));
    start = end + 1;
    ++lineno;
    if (t.empty() || t[0] == '#') continue;
    const bool csv_ok = split_csv(t, &row, &err);
    const std::size_t comma = t.rfind(',');
    if (mode == Mode::kStart) {
      // A header of one column, `image` (or `path`): images without labels
      // (label -1), one cell per row. NOTE: only those names: any other
      // single word may be a file's path, and a list of paths without a
      // header stays an error rather than a guess.
      if (comma == std::string::npos && csv_ok && row.size() == 1 && (row[0] == "image" || row[0] == "path")) {
        header = row;
        header_line = lineno;
        if (Status st = name_columns(); !st.ok()) return st;
        mode = Mode::kNamed;
        continue;
      }
      if (comma == std::string::npos) {
        return Status::InvalidArgument(where() +
                                       "expected 'path,label' or a header row ('image' alone for images "
                                       "without labels), got '" +
                                       t.substr(0, 80) + "'");
      }
      std::int64_t v = 0;
      if (!parse_label(csv_ok ? row.back() : trim(std::string_view(t).substr(comma + 1)), &v)) {  // a header
        if (csv_ok) header = row;
        header_line = lineno;
        if (csv_ok && row.size() >= 3) {
          if (Status st = name_columns(); !st.ok()) return st;
          mode = Mode::kNamed;
        } else {
          mode = Mode::kAfterHeader;
        }
        continue;
      }
      mode = Mode::kLegacy;
    }
    if (mode == Mode::kAfterHeader) {
      // Two columns: the second is the label (whatever its name) when this
      // first row's holds an integer, or when named `label` and not a path;
      // else (`image,mask`, `image,label` of label volumes) both are named
      // columns.
      std::int64_t v = 0;
      const std::string last = csv_ok && row.size() == 2    ? row[1]
                               : comma == std::string::npos ? ""
                                                            : trim(std::string_view(t).substr(comma + 1));
      const bool label_of_paths = header.size() == 2 && header[1] == "label" && !last.empty() && !is_integer(last) &&
                                  last.find_first_of("./") != std::string::npos;
      if (header.size() != 2 || (header[1] == "label" && !label_of_paths) || parse_label(last, &v)) {
        mode = Mode::kLegacy;
      } else {
        if (Status st = name_columns(); !st.ok()) return st;
        mode = Mode::kNamed;
      }
    }
    if (mode == Mode::kLegacy) {
      std::string path, lab;
      if (csv_ok && row.size() == 2) {  // also a quoted path ("a,b.jpg",3)
        path = row[0];
        lab = row[1];
      } else {  // label = the last comma field; the path may hold commas
        if (comma == std::string::npos) {
          return Status::InvalidArgument(where() + "expected 'path,label', got '" + t.substr(0, 80) + "'");
        }
        path = trim(std::string_view(t).substr(0, comma));
        lab = trim(std::string_view(t).substr(comma + 1));
      }
      std::int64_t label = 0;
      if (!parse_label(lab, &label)) {
        return Status::InvalidArgument(where() + "label must be a non-negative integer, got '" + lab.substr(0, 40) +
                                       "'");
      }
      if (path.empty()) return Status::InvalidArgument(where() + "empty path");
      paths->push_back(resolve(path));
      labels->push_back(label);
      continue;
    }
    // kNamed
    if (!csv_ok) return Status::InvalidArgument(where() + err);
    if (row.size() != header.size()) {
      return Status::InvalidArgument(where() + "expected " + std::to_string(header.size()) + " cells (" + join(header) +
                                     "), found " + std::to_string(row.size()));
    }
    if (row[primary].empty()) return Status::InvalidArgument(where() + "empty '" + header[primary] + "' cell");
    // NOTE: a `label` column of paths (image,label as the Medical Segmentation
    // Decathlon pairs a scan with its label volume) is a member column: the
    // first row decides (a path has a '.' or a '/'; anything else stays a
    // label, refused below when it is not an integer).
    if (paths->empty() && label_col != SIZE_MAX && !row[label_col].empty() && !is_integer(row[label_col]) &&
        row[label_col].find_first_of("./") != std::string::npos) {
      member_cols.insert(std::upper_bound(member_cols.begin(), member_cols.end(), label_col), label_col);
      label_col = SIZE_MAX;
    }
    std::int64_t label = -1;
    if (label_col != SIZE_MAX && !parse_label(row[label_col], &label)) {
      return Status::InvalidArgument(where() + "label must be a non-negative integer, got '" +
                                     row[label_col].substr(0, 40) + "'");
    }
    paths->push_back(resolve(row[primary]));
    labels->push_back(label);
    for (std::size_t c : member_cols) cells.push_back(std::move(row[c]));
  }
  if (paths->empty()) return Status::NotFound("list file '" + name + "' lists no records");
  if (mode != Mode::kNamed || columns == nullptr) return Status::Ok();
  // A member column is a value column when every non-empty cell is an
  // integer; the others hold paths.
  const std::size_t m = member_cols.size();
  ListColumns& out = *columns;
  out = ListColumns{};
  out.header = header;
  out.primary = header[primary];
  if (label_col != SIZE_MAX) out.label = header[label_col];
  for (std::size_t k = 0; k < m; ++k) {
    bool values = true;
    for (std::size_t i = k; i < cells.size() && values; i += m) values = cells[i].empty() || is_integer(cells[i]);
    out.members.push_back(header[member_cols[k]]);
    out.is_file.push_back(!values);
    if (values) continue;
    for (std::size_t i = k; i < cells.size(); i += m) {
      if (!cells[i].empty()) cells[i] = resolve(cells[i]);
    }
  }
  out.cells = std::move(cells);
  return Status::Ok();
}

}  // namespace detail

std::unique_ptr<Source> open_list_file(const std::string& list) {
  std::vector<std::uint8_t> bytes;
  Status st = detail::read_file(list, &bytes);
  if (!st.ok()) throw Error(Code::kNotFound, "list file '" + list + "' cannot be read: " + st.message());
  std::vector<std::string> paths;
  std::vector<std::int64_t> labels;
  detail::ListColumns columns;
  st = detail::parse_list(std::string(bytes.begin(), bytes.end()), list, fs::path(list).parent_path().string(), &paths,
                          &labels, &columns);
  if (!st.ok()) throw Error(st);
  return detail::make_file_list_source(std::move(paths), std::move(labels), {}, "list file '" + list + "'",
                                       fs::path(list).parent_path().string(), std::move(columns));
}

}  // namespace stoker
