// S3 without the network: `s3://` URLs, the endpoint, region and static
// credentials from the environment and the AWS CLI's files, request URLs
// built already canonical for curl's SigV4 signer (CURLOPT_AWS_SIGV4), and
// the parsing of ListObjectsV2 and error bodies.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {

struct S3Url {
  std::string bucket, key;
};

// "s3://bucket/key/with/slashes" -> {bucket, key}. kInvalidArgument naming
// the URL and why: not s3://, no bucket, a bucket with characters outside
// [A-Za-z0-9.-_] (it goes unencoded into a host name or path), user:password@
// (the URL is then not echoed), an empty key (allowed only when
// allow_empty_key, for listings; "s3://b" and "s3://b/" both give ""), a key
// with "." or ".." segments or an empty segment ("//", a leading '/'), which
// curl would normalise away and so sign a different path. A trailing '/' is
// allowed ("s3://b/dir/" lists dir/).
Status parse_s3_url(const std::string& url, S3Url* out, bool allow_empty_key = false);

struct S3Credentials {
  std::string access_key, secret_key, session_token;
  // Where they came from, for messages: "environment (AWS_ACCESS_KEY_ID)",
  // "profile 'train' in /home/u/.aws/credentials", or "none: unsigned requests".
  std::string source;
  bool empty() const { return access_key.empty(); }
};

struct S3Config {
  std::string endpoint;     // scheme://host[:port], no trailing slash
  std::string region;       // for the signature
  bool path_style = false;  // true with a custom endpoint; the URL builders also use it for buckets with a '.'
  S3Credentials credentials;
};

// Endpoint: AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL (the service-specific
// one wins), else https://s3.<region>.amazonaws.com.
// Region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else us-east-1.
// Credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)
// (one without the other: an error); else the profile AWS_PROFILE (default
// "default"): [name] in AWS_SHARED_CREDENTIALS_FILE (default
// $HOME/.aws/credentials), then [profile name] (or [default]) in
// AWS_CONFIG_FILE (default $HOME/.aws/config), each file taken whole (the
// first holding a key pair wins, as botocore's provider chain does); else
// unsigned requests. A profile with role_arn, credential_source,
// web_identity_token_file, sso_* or credential_process is refused, naming the
// profile and file and suggesting `aws configure export-credentials`: stoker
// reads static keys only. AWS_PROFILE set to a profile in neither file is an
// error naming both files (when the profile is consulted at all). An empty
// variable counts as unset. Throws Error(kInvalidArgument). No message ever
// holds a secret key or session token.
S3Config resolve_s3_config(const std::function<const char*(const char*)>& getenv_fn = [](const char* n) {
  return std::getenv(n);
});

// RFC 3986 encoding as SigV4 needs it: unreserved A-Za-z0-9-_.~ kept,
// every other byte %XX (uppercase hex); '/' kept when keep_slash.
std::string uri_encode(std::string_view s, bool keep_slash);

// The GET/HEAD URL of an object: path-style "<endpoint>/<bucket>/<encoded key>",
// virtual-hosted "<scheme>://<bucket>.<endpoint host>/<encoded key>".
// Path-style when c.path_style or the bucket holds a '.'.
std::string s3_object_url(const S3Config& c, const S3Url& u);

// ListObjectsV2: "<endpoint>/<bucket>?continuation-token=..&list-type=2&max-keys=N&prefix=.."
// (virtual-hosted: "<scheme>://<bucket>.<host>/?..."), parameters sorted by
// name, values uri_encode(v, false); an empty continuation token and
// max_keys <= 0 are left out, prefix is always there.
std::string s3_list_url(const S3Config& c, const std::string& bucket, const std::string& prefix,
                        const std::string& continuation_token, int max_keys = 0);

struct S3Object {
  std::string key;
  std::uint64_t size = 0;
  std::string etag;  // as S3 sends it, quotes included: "\"b1946ac9...\"" (entities decoded)
};

struct S3ListPage {
  std::vector<S3Object> objects;
  bool truncated = false;
  std::string next_token;
};

// Parses a ListBucketResult: every Contents' Key, Size and ETag (all
// required), IsTruncated (required) and NextContinuationToken (required when
// truncated). XML entities are decoded (&quot; &amp; &lt; &gt; &apos; &#NN;
// &#xHH;); keys are not trimmed. kCorrupt naming what is missing or
// malformed; an S3 <Error> body is reported with its code and message.
// `out` is overwritten.
Status parse_s3_list(std::string_view xml, S3ListPage* out);

// "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>..."
// -> "NoSuchKey: The specified key does not exist." ("NoSuchKey" without a
// Message; the message is cut at 512 bytes); "" when the body is not an S3 error.
std::string parse_s3_error(std::string_view body);

// The literal prefix of a key pattern: the key up to its first '*', '?', '['
// or '\' (a backslash escape ends it too, so the prefix is never longer than
// the literal part fnmatch sees).
std::string s3_glob_prefix(const std::string& key_pattern);

// fnmatch(pattern, key, FNM_PATHNAME): '*' and '?' do not cross '/'.
bool s3_key_matches(const std::string& pattern, const std::string& key);

// "s3://bucket/key", for messages (never a credential).
std::string s3_display(const S3Url& u);

}  // namespace stoker::detail
