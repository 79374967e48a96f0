#include "source/remote/s3.h"

#include <fnmatch.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "util/util.h"

namespace stoker::detail {
namespace {

constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim(std::string_view s) {
  const std::size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  const std::size_t e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

bool is_alnum(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool is_unreserved(char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.' || c == '~'; }

// ---------------------------------------------------------------- configuration

// An environment variable, "" when unset or empty.
std::string env(const std::function<const char*(const char*)>& getenv_fn, const char* name) {
  const char* v = getenv_fn(name);
  return v ? std::string(v) : std::string();
}

// "scheme://host[:port]" with the scheme lowercased and trailing slashes
// removed; throws naming `var` otherwise. The value is echoed only when it
// holds no '@' (user:password@ would be a credential).
std::string normalise_endpoint(const std::string& var, std::string value) {
  const std::string shown = value.find('@') == std::string::npos ? "'" + value + "'" : "(not shown: it holds '@')";
  const std::size_t sep = value.find("://");
  std::string scheme = sep == std::string::npos ? "" : value.substr(0, sep);
  for (char& ch : scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (scheme != "http" && scheme != "https") {
    invalid(var + " " + shown + ": expected http://host[:port] or https://host[:port]");
  }
  std::string rest = value.substr(sep + 3);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty()) invalid(var + " " + shown + ": no host");
  if (rest.find_first_of("/?#@ \t") != std::string::npos) {
    invalid(var + " " + shown + ": expected scheme://host[:port], without a path, query or user");
  }
  return scheme + "://" + rest;
}

void check_region(const std::string& region, const std::string& from) {
  for (char ch : region) {
    if (!(is_alnum(ch) || ch == '-' || ch == '_' || ch == '.')) {
      // NOTE: the region goes into a host name and into CURLOPT_AWS_SIGV4's "aws:amz:<region>:s3"
      invalid("AWS region '" + region + "' from " + from + ": expected letters, digits, '-', '_' or '.'");
    }
  }
}

// One AWS CLI INI file: sections by their header text ("default", "profile x"),
// keys lowercased.
struct IniFile {
  std::string path;
  bool exists = false;
  std::map<std::string, std::map<std::string, std::string>> sections;
};

IniFile read_ini(const std::string& path) {
  IniFile ini;
  ini.path = path;
  if (path.empty()) return ini;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    if (errno == ENOENT || errno == ENOTDIR) return ini;
    invalid("AWS file " + path + ": cannot read: " + std::strerror(errno));
  }
  std::string text;
  char buf[8192];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    text.append(buf, n);
    if (text.size() > (16u << 20)) break;  // NOTE: a real AWS file is a few KiB; bound what a wrong path costs
  }
  std::fclose(f);
  ini.exists = true;
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);

  std::map<std::string, std::string>* section = nullptr;
  bool have_key = false;  // a key line seen in this section: indented lines after it continue it
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string_view raw(text.data() + pos, eol - pos);
    pos = eol + 1;
    const std::string_view line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    // NOTE: as Python's configparser (botocore): an indented line after a key continues its value
    // (the nested "s3 =\n  addressing_style = path" form); such sub-keys are not the profile's own.
    if (have_key && (raw[0] == ' ' || raw[0] == '\t')) continue;
    if (line[0] == '[') {
      const std::size_t close = line.find(']');
      section = nullptr;
      have_key = false;
      if (close == std::string_view::npos) continue;
      // "[ profile  x ]" is "profile x"
      std::string name;
      std::string_view inner = trim(line.substr(1, close - 1));
      while (!inner.empty()) {
        const std::size_t sp = inner.find_first_of(" \t");
        if (!name.empty()) name += ' ';
        name += std::string(inner.substr(0, sp));
        inner = sp == std::string_view::npos ? std::string_view() : trim(inner.substr(sp));
      }
      section = &ini.sections[name];
      continue;
    }
    const std::size_t eq = line.find_first_of("=:");
    if (eq == std::string_view::npos || section == nullptr) continue;
    std::string key(trim(line.substr(0, eq)));
    for (char& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    (*section)[key] = std::string(trim(line.substr(eq + 1)));
    have_key = true;
  }
  return ini;
}

std::string expand_home(const std::string& path, const std::string& home) {
  if (path == "~") return home;
  if (path.compare(0, 2, "~/") == 0 && !home.empty()) return home + path.substr(1);
  return path;
}

// The profile's section in one file, or nullptr.
const std::map<std::string, std::string>* find_profile(const IniFile& ini, const std::string& profile,
                                                       bool config_file) {
  auto it = ini.sections.end();
  if (config_file) {
    it = ini.sections.find("profile " + profile);
    if (it == ini.sections.end() && profile == "default") it = ini.sections.find("default");
  } else {
    it = ini.sections.find(profile);
  }
  return it == ini.sections.end() ? nullptr : &it->second;
}

std::string get(const std::map<std::string, std::string>* s, const std::string& key) {
  if (s == nullptr) return {};
  auto it = s->find(key);
  return it == s->end() ? std::string() : it->second;
}

// Refuses what botocore would resolve before (or instead of) static keys.
void refuse_unsupported(const std::map<std::string, std::string>* s, const std::string& profile,
                        const std::string& path) {
  if (s == nullptr) return;
  for (const auto& [key, value] : *s) {
    const bool refused = key == "role_arn" || key == "credential_source" || key == "web_identity_token_file" ||
                         key == "credential_process" || key.compare(0, 4, "sso_") == 0;
    if (!refused) continue;
    // NOTE: the value is not echoed: a credential_process command line may carry a secret
    invalid("AWS profile '" + profile + "' in " + path + " uses " + key +
            ", which stoker does not support: it reads static keys only. Export temporary keys with `aws configure "
            "export-credentials --profile " +
            profile + " --format env` (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)");
  }
}

// ---------------------------------------------------------------- XML

// A tiny XML reader for S3's responses: elements, their direct text
// (entities and CDATA decoded), attributes skipped, comments, processing
// instructions and DOCTYPE ignored. Namespace prefixes are dropped from names.
struct XmlNode {
  std::string name;
  std::string text;
  std::vector<XmlNode> children;

  const XmlNode* child(std::string_view n) const {
    for (const auto& c : children) {
      if (c.name == n) return &c;
    }
    return nullptr;
  }
};

constexpr int kMaxXmlDepth = 32;

void append_utf8(std::uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class XmlReader {
 public:
  explicit XmlReader(std::string_view s) : s_(s) {}

  // The document's root element.
  Status parse(XmlNode* root) {
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") p_ = 3;
    Status st = skip_misc();
    if (!st.ok()) return st;
    if (p_ >= s_.size() || s_[p_] != '<') return error("no root element");
    st = element(root, 0);
    if (!st.ok()) return st;
    st = skip_misc();
    if (!st.ok()) return st;
    if (p_ != s_.size()) return error("content after the root element");
    return Status::Ok();
  }

 private:
  Status error(const std::string& why) const {
    return Status::Corrupt("XML: " + why + " at byte " + std::to_string(p_));
  }

  bool starts(std::string_view t) const { return s_.substr(p_, t.size()) == t; }

  // Skips past `end`, false when it never comes.
  bool skip_past(std::string_view end) {
    const std::size_t e = s_.find(end, p_);
    if (e == std::string_view::npos) return false;
    p_ = e + end.size();
    return true;
  }

  // Whitespace, comments, processing instructions and DOCTYPE between elements.
  Status skip_misc() {
    for (;;) {
      while (p_ < s_.size() && kSpace.find(s_[p_]) != std::string_view::npos) ++p_;
      if (starts("<?")) {
        if (!skip_past("?>")) return error("unterminated <?");
      } else if (starts("<!--")) {
        if (!skip_past("-->")) return error("unterminated comment");
      } else if (starts("<!DOCTYPE")) {
        if (!skip_past(">")) return error("unterminated DOCTYPE");
      } else {
        return Status::Ok();
      }
    }
  }

  std::string_view name() {
    const std::size_t b = p_;
    while (p_ < s_.size() && std::string_view(" \t\r\n/>=").find(s_[p_]) == std::string_view::npos) ++p_;
    return s_.substr(b, p_ - b);
  }

  static std::string local(std::string_view n) {
    const std::size_t colon = n.rfind(':');
    return std::string(colon == std::string_view::npos ? n : n.substr(colon + 1));
  }

  // At '<' of a start tag.
  Status element(XmlNode* node, int depth) {
    if (depth >= kMaxXmlDepth) return error("elements nested deeper than " + std::to_string(kMaxXmlDepth));
    ++p_;
    const std::string_view raw_name = name();
    if (raw_name.empty()) return error("a tag without a name");
    node->name = local(raw_name);
    // Attributes: skipped, minding quoted values (which may hold '>' or '/').
    for (;;) {
      if (p_ >= s_.size()) return error("unterminated <" + node->name + ">");
      const char ch = s_[p_];
      if (ch == '"' || ch == '\'') {
        const std::size_t e = s_.find(ch, p_ + 1);
        if (e == std::string_view::npos) return error("unterminated attribute value in <" + node->name + ">");
        p_ = e + 1;
      } else if (ch == '>') {
        ++p_;
        break;
      } else if (starts("/>")) {
        p_ += 2;
        return Status::Ok();
      } else {
        ++p_;
      }
    }
    // Content.
    for (;;) {
      const std::size_t lt = s_.find('<', p_);
      if (lt == std::string_view::npos) return error("no </" + node->name + ">");
      Status st = decode(s_.substr(p_, lt - p_), &node->text);
      if (!st.ok()) return st;
      p_ = lt;
      if (starts("</")) {
        p_ += 2;
        const std::string_view end = name();
        if (local(end) != node->name) return error("</" + std::string(end) + "> closes <" + node->name + ">");
        while (p_ < s_.size() && kSpace.find(s_[p_]) != std::string_view::npos) ++p_;
        if (p_ >= s_.size() || s_[p_] != '>') return error("unterminated </" + node->name + ">");
        ++p_;
        return Status::Ok();
      }
      if (starts("<![CDATA[")) {
        p_ += 9;
        const std::size_t e = s_.find("]]>", p_);
        if (e == std::string_view::npos) return error("unterminated CDATA");
        node->text.append(s_.substr(p_, e - p_));
        p_ = e + 3;
      } else if (starts("<!--")) {
        if (!skip_past("-->")) return error("unterminated comment");
      } else if (starts("<?")) {
        if (!skip_past("?>")) return error("unterminated <?");
      } else {
        node->children.emplace_back();
        st = element(&node->children.back(), depth + 1);
        if (!st.ok()) return st;
      }
    }
  }

  // Appends `t` with its entity references decoded.
  Status decode(std::string_view t, std::string* out) const {
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t[i] != '&') {
        *out += t[i];
        continue;
      }
      const std::size_t semi = t.find(';', i);
      if (semi == std::string_view::npos || semi - i > 12) return error("a '&' without an entity");
      const std::string_view ent = t.substr(i + 1, semi - i - 1);
      if (ent == "quot")
        *out += '"';
      else if (ent == "amp")
        *out += '&';
      else if (ent == "lt")
        *out += '<';
      else if (ent == "gt")
        *out += '>';
      else if (ent == "apos")
        *out += '\'';
      else if (ent.size() >= 2 && ent[0] == '#') {
        const bool hex = ent[1] == 'x' || ent[1] == 'X';
        const std::string_view digits = ent.substr(hex ? 2 : 1);
        std::uint32_t cp = 0;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
        if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || cp == 0 || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF)) {
          return error("bad character reference &" + std::string(ent) + ";");
        }
        append_utf8(cp, out);
      } else {
        return error("unknown entity &" + std::string(ent.substr(0, 12)) + ";");
      }
      i = semi;
    }
    return Status::Ok();
  }

  std::string_view s_;
  std::size_t p_ = 0;
};

}  // namespace

// ---------------------------------------------------------------- URLs

Status parse_s3_url(const std::string& url, S3Url* out, bool allow_empty_key) {
  if (url.compare(0, 5, "s3://") != 0) return Status::InvalidArgument("'" + url + "' is not an s3:// URL");
  const std::size_t slash = url.find('/', 5);
  const std::string bucket = url.substr(5, slash == std::string::npos ? std::string::npos : slash - 5);
  if (bucket.find('@') != std::string::npos) {
    // NOTE: not echoed: "s3://KEY:SECRET@bucket/..." would put a secret in the message
    return Status::InvalidArgument(
        "an s3:// URL must not carry credentials (user:password@); set AWS_ACCESS_KEY_ID "
        "and AWS_SECRET_ACCESS_KEY or use a profile");
  }
  if (bucket.empty()) return Status::InvalidArgument("s3 URL '" + url + "': no bucket (expected s3://bucket/key)");
  for (char ch : bucket) {
    if (!(is_alnum(ch) || ch == '.' || ch == '-' || ch == '_')) {
      return Status::InvalidArgument("s3 URL '" + url + "': bucket '" + bucket +
                                     "' holds a character other than letters, digits, '.', '-' and '_'");
    }
  }
  const std::string key = slash == std::string::npos ? std::string() : url.substr(slash + 1);
  if (key.empty() && !allow_empty_key) {
    return Status::InvalidArgument("s3 URL '" + url + "': no key (expected s3://bucket/key)");
  }
  // NOTE: curl removes dot segments and the signature covers the path it sends, so such keys
  // would fetch (and sign) another object; an empty segment is refused likewise.
  std::size_t start = 0;
  while (start < key.size()) {
    std::size_t end = key.find('/', start);
    const bool last = end == std::string::npos;
    if (last) end = key.size();
    const std::string_view seg(key.data() + start, end - start);
    if (seg == "." || seg == "..") {
      return Status::InvalidArgument("s3 URL '" + url + "': the key has a '" + std::string(seg) +
                                     "' segment, which curl would remove from the path");
    }
    if (seg.empty()) {
      return Status::InvalidArgument("s3 URL '" + url + "': the key has an empty segment ('//' or a leading '/')");
    }
    if (last) break;
    start = end + 1;  // a trailing '/' ends the loop here: "dir/" is allowed
  }
  out->bucket = bucket;
  out->key = key;
  return Status::Ok();
}

std::string uri_encode(std::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (is_unreserved(ch) || (keep_slash && ch == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

namespace {

// "<endpoint>/<bucket>" or "<scheme>://<bucket>.<host>": the URL before the object's path.
std::string bucket_base(const S3Config& c, const std::string& bucket, bool* virtual_host) {
  const std::size_t sep = c.endpoint.find("://");
  *virtual_host = !c.path_style && bucket.find('.') == std::string::npos && sep != std::string::npos;
  if (!*virtual_host) return c.endpoint + "/" + bucket;
  return c.endpoint.substr(0, sep + 3) + bucket + "." + c.endpoint.substr(sep + 3);
}

}  // namespace

std::string s3_object_url(const S3Config& c, const S3Url& u) {
  bool virtual_host;
  return bucket_base(c, u.bucket, &virtual_host) + "/" + uri_encode(u.key, true);
}

std::string s3_list_url(const S3Config& c, const std::string& bucket, const std::string& prefix,
                        const std::string& continuation_token, int max_keys) {
  bool virtual_host;
  std::string url = bucket_base(c, bucket, &virtual_host);
  url += virtual_host ? "/?" : "?";
  // NOTE: sorted by name: curl 7.88 signs the query as sent, and SigV4's canonical query is sorted
  if (!continuation_token.empty()) url += "continuation-token=" + uri_encode(continuation_token, false) + "&";
  url += "list-type=2&";
  if (max_keys > 0) url += "max-keys=" + std::to_string(max_keys) + "&";
  url += "prefix=" + uri_encode(prefix, false);
  return url;
}

std::string s3_display(const S3Url& u) { return "s3://" + u.bucket + "/" + u.key; }

std::string s3_glob_prefix(const std::string& key_pattern) {
  return key_pattern.substr(0, key_pattern.find_first_of("*?[\\"));
}

bool s3_key_matches(const std::string& pattern, const std::string& key) {
  return ::fnmatch(pattern.c_str(), key.c_str(), FNM_PATHNAME) == 0;
}

// ---------------------------------------------------------------- configuration

S3Config resolve_s3_config(const std::function<const char*(const char*)>& getenv_fn) {
  S3Config c;
  const std::string home = env(getenv_fn, "HOME");
  const std::string env_profile = env(getenv_fn, "AWS_PROFILE");
  const std::string profile = env_profile.empty() ? "default" : env_profile;

  // The two files, read at most once and only when something is looked up in them.
  bool loaded = false;
  IniFile cred_file, config_file;
  const std::map<std::string, std::string>* cred_section = nullptr;
  const std::map<std::string, std::string>* config_section = nullptr;
  auto load = [&] {
    if (loaded) return;
    loaded = true;
    std::string cred_path = env(getenv_fn, "AWS_SHARED_CREDENTIALS_FILE");
    std::string config_path = env(getenv_fn, "AWS_CONFIG_FILE");
    if (cred_path.empty() && !home.empty()) cred_path = home + "/.aws/credentials";
    if (config_path.empty() && !home.empty()) config_path = home + "/.aws/config";
    cred_file = read_ini(expand_home(cred_path, home));
    config_file = read_ini(expand_home(config_path, home));
    cred_section = find_profile(cred_file, profile, false);
    config_section = find_profile(config_file, profile, true);
    if (!env_profile.empty() && cred_section == nullptr && config_section == nullptr) {
      auto describe = [](const IniFile& f) {
        if (f.path.empty()) return std::string("(no file: HOME is not set)");
        return f.path + (f.exists ? "" : " (missing)");
      };
      invalid("AWS_PROFILE='" + profile + "': no profile [" + profile + "] in " + describe(cred_file) +
              " and no [profile " + profile + "] in " + describe(config_file));
    }
  };

  // Region.
  std::string region = env(getenv_fn, "AWS_REGION");
  std::string region_from = "AWS_REGION";
  if (region.empty()) {
    region = env(getenv_fn, "AWS_DEFAULT_REGION");
    region_from = "AWS_DEFAULT_REGION";
  }
  if (region.empty()) {
    load();
    // NOTE: botocore merges the credentials file's keys over the config file's, region included
    if (!(region = get(cred_section, "region")).empty()) {
      region_from = "profile '" + profile + "' in " + cred_file.path;
    } else if (!(region = get(config_section, "region")).empty()) {
      region_from = "profile '" + profile + "' in " + config_file.path;
    }
  }
  if (region.empty()) {
    region = "us-east-1";
    region_from = "the default";
  }
  check_region(region, region_from);
  c.region = region;

  // Endpoint.
  std::string endpoint = env(getenv_fn, "AWS_ENDPOINT_URL_S3");
  std::string endpoint_var = "AWS_ENDPOINT_URL_S3";
  if (endpoint.empty()) {
    endpoint = env(getenv_fn, "AWS_ENDPOINT_URL");
    endpoint_var = "AWS_ENDPOINT_URL";
  }
  if (!endpoint.empty()) {
    c.endpoint = normalise_endpoint(endpoint_var, endpoint);
    c.path_style = true;  // NOTE: a custom endpoint (MinIO, s3rver, Ceph) is rarely set up for bucket host names
  } else {
    c.endpoint = "https://s3." + region + ".amazonaws.com";
  }

  // Credentials.
  S3Credentials& cr = c.credentials;
  const std::string id = env(getenv_fn, "AWS_ACCESS_KEY_ID");
  const std::string secret = env(getenv_fn, "AWS_SECRET_ACCESS_KEY");
  if (!id.empty() || !secret.empty()) {
    if (id.empty()) invalid("AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not: set both, or neither");
    if (secret.empty()) invalid("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not: set both, or neither");
    cr.access_key = id;
    cr.secret_key = secret;
    cr.session_token = env(getenv_fn, "AWS_SESSION_TOKEN");
    cr.source = "environment (AWS_ACCESS_KEY_ID)";
    return c;
  }
  load();
  refuse_unsupported(cred_section, profile, cred_file.path);
  refuse_unsupported(config_section, profile, config_file.path);
  using Section = const std::map<std::string, std::string>*;
  const std::pair<Section, const IniFile*> files[] = {{cred_section, &cred_file}, {config_section, &config_file}};
  for (const auto& [section, file] : files) {
    const std::string fid = get(section, "aws_access_key_id");
    const std::string fsecret = get(section, "aws_secret_access_key");
    if (fid.empty() && fsecret.empty()) continue;
    const std::string where = "profile '" + profile + "' in " + file->path;
    if (fid.empty()) invalid(where + " has aws_secret_access_key but no aws_access_key_id");
    if (fsecret.empty()) invalid(where + " has aws_access_key_id but no aws_secret_access_key");
    cr.access_key = fid;
    cr.secret_key = fsecret;
    cr.session_token = get(section, "aws_session_token");
    cr.source = where;
    return c;
  }
  cr.source = "none: unsigned requests";
  return c;
}

// ---------------------------------------------------------------- responses

Status parse_s3_list(std::string_view xml, S3ListPage* out) {
  *out = S3ListPage();
  XmlNode root;
  Status st = XmlReader(xml).parse(&root);
  if (!st.ok()) return Status::Corrupt("S3 listing: " + st.message());
  if (root.name != "ListBucketResult") {
    const std::string err = parse_s3_error(xml);
    if (!err.empty()) return Status::Corrupt("S3 listing: the body is an S3 error: " + err);
    return Status::Corrupt("S3 listing: the root element is <" + root.name + ">, not <ListBucketResult>");
  }
  const XmlNode* truncated = root.child("IsTruncated");
  if (truncated == nullptr) return Status::Corrupt("S3 listing: no <IsTruncated>");
  const std::string_view t = trim(truncated->text);
  if (t != "true" && t != "false") {
    return Status::Corrupt("S3 listing: <IsTruncated> is '" + std::string(t.substr(0, 40)) + "', not true or false");
  }
  out->truncated = t == "true";
  if (const XmlNode* next = root.child("NextContinuationToken")) out->next_token = next->text;
  if (out->truncated && out->next_token.empty()) {
    return Status::Corrupt("S3 listing: truncated, but no <NextContinuationToken>");
  }
  for (const XmlNode& c : root.children) {
    if (c.name != "Contents") continue;
    const std::string n = std::to_string(out->objects.size() + 1);
    const XmlNode* key = c.child("Key");
    if (key == nullptr || key->text.empty()) return Status::Corrupt("S3 listing: <Contents> #" + n + " has no <Key>");
    const XmlNode* size = c.child("Size");
    if (size == nullptr) return Status::Corrupt("S3 listing: no <Size> for '" + key->text + "'");
    const XmlNode* etag = c.child("ETag");
    if (etag == nullptr || etag->text.empty()) return Status::Corrupt("S3 listing: no <ETag> for '" + key->text + "'");
    S3Object o;
    const std::string_view s = trim(size->text);
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), o.size);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      return Status::Corrupt("S3 listing: <Size> of '" + key->text + "' is '" + std::string(s.substr(0, 40)) +
                             "', not a byte count");
    }
    o.key = key->text;
    o.etag = etag->text;
    out->objects.push_back(std::move(o));
  }
  return Status::Ok();
}

std::string parse_s3_error(std::string_view body) {
  XmlNode root;
  if (!XmlReader(body).parse(&root).ok() || root.name != "Error") return {};
  const XmlNode* code = root.child("Code");
  if (code == nullptr) return {};
  const std::string_view c = trim(code->text);
  if (c.empty()) return {};
  const XmlNode* message = root.child("Message");
  std::string_view m = message ? trim(message->text) : std::string_view();
  if (m.empty()) return std::string(c);
  std::string out = std::string(c) + ": " + std::string(m.substr(0, 512));
  if (m.size() > 512) out += "...";
  return out;
}

}  // namespace stoker::detail
