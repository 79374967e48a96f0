#include "source/remote/s3.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace stoker::detail {
namespace {

// ---------------------------------------------------------------- helpers

// A fake environment for resolve_s3_config.
class Env {
 public:
  Env& set(const std::string& name, const std::string& value) {
    vars_[name] = value;
    return *this;
  }
  std::function<const char*(const char*)> fn() const {
    return [this](const char* n) -> const char* {
      auto it = vars_.find(n);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }
  S3Config resolve() const { return resolve_s3_config(fn()); }

 private:
  std::map<std::string, std::string> vars_;
};

// A HOME directory with .aws/credentials and .aws/config, removed by the destructor.
class Home {
 public:
  Home() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/stoker-s3-test-XXXXXX";
    char* made = ::mkdtemp(templ.data());
    EXPECT_NE(made, nullptr);
    path_ = templ;
    std::filesystem::create_directories(path_ + "/.aws");
  }
  ~Home() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string credentials() const { return path_ + "/.aws/credentials"; }
  std::string config() const { return path_ + "/.aws/config"; }
  void write(const std::string& file, const std::string& text) const { std::ofstream(file) << text; }

 private:
  std::string path_;
};

// The message of the Error resolve_s3_config throws, with its code checked.
std::string resolve_error(const Env& env) {
  try {
    env.resolve();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << "resolve_s3_config did not throw";
  return "";
}

Status parse(const std::string& url, S3Url* u, bool allow_empty_key = false) {
  return parse_s3_url(url, u, allow_empty_key);
}

// ---------------------------------------------------------------- parse_s3_url

TEST(S3Url, ParsesBucketAndKey) {
  S3Url u;
  ASSERT_TRUE(parse("s3://bucket/key/with/slashes", &u).ok());
  EXPECT_EQ(u.bucket, "bucket");
  EXPECT_EQ(u.key, "key/with/slashes");
  ASSERT_TRUE(parse("s3://my.bucket-1/a b/c+d.tar", &u).ok());
  EXPECT_EQ(u.bucket, "my.bucket-1");
  EXPECT_EQ(u.key, "a b/c+d.tar");
  // Dots inside segments are ordinary characters; so is a trailing '/'.
  ASSERT_TRUE(parse("s3://b/.hidden/..x/.../y.", &u).ok());
  EXPECT_EQ(u.key, ".hidden/..x/.../y.");
  ASSERT_TRUE(parse("s3://b/dir/", &u).ok());
  EXPECT_EQ(u.key, "dir/");
  // Glob characters are kept for expansion.
  ASSERT_TRUE(parse("s3://b/train/*.tar", &u).ok());
  EXPECT_EQ(u.key, "train/*.tar");
}

TEST(S3Url, RefusesNoBucketAndOtherSchemes) {
  S3Url u;
  for (const std::string url : {"s3:///key", "s3://", "s3:/"}) {
    Status st = parse(url, &u, true);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << url;
    if (url != "s3:/") {
      EXPECT_NE(st.message().find("no bucket"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("'" + url + "'"), std::string::npos) << st.message();
    }
  }
  Status st = parse("https://host/b/k", &u);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("https://host/b/k"), std::string::npos);
  EXPECT_EQ(parse("S3://b/k", &u).code(), Code::kInvalidArgument);
  st = parse("s3://b?x/k", &u);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("bucket 'b?x'"), std::string::npos) << st.message();
}

TEST(S3Url, RefusesCredentialsWithoutEchoingThem) {
  S3Url u;
  Status st = parse("s3://AKIAEXAMPLE:TopSecret123@bucket/k", &u);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message().find("TopSecret123"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("credentials"), std::string::npos) << st.message();
}

TEST(S3Url, RefusesDotSegmentsAndEmptySegments) {
  S3Url u;
  for (const std::string url : {"s3://b/a/./c", "s3://b/a/../c", "s3://b/..", "s3://b/.", "s3://b/a/..", "s3://b/../a",
                                "s3://b/a//c", "s3://b//a", "s3://b/a/./"}) {
    Status st = parse(url, &u, true);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << url;
    EXPECT_NE(st.message().find("'" + url + "'"), std::string::npos) << st.message();
  }
  EXPECT_NE(parse("s3://b/a/../c", &u).message().find("'..' segment"), std::string::npos);
  EXPECT_NE(parse("s3://b/a//c", &u).message().find("empty segment"), std::string::npos);
}

TEST(S3Url, EmptyKeyOnlyForListings) {
  S3Url u;
  for (const std::string url : {"s3://b", "s3://b/"}) {
    Status st = parse(url, &u);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << url;
    EXPECT_NE(st.message().find("no key"), std::string::npos) << st.message();
    u = S3Url{"x", "y"};
    ASSERT_TRUE(parse(url, &u, true).ok()) << url;
    EXPECT_EQ(u.bucket, "b");
    EXPECT_EQ(u.key, "");
  }
}

TEST(S3Url, Display) {
  S3Url u;
  ASSERT_TRUE(parse("s3://bucket/a/b.tar", &u).ok());
  EXPECT_EQ(s3_display(u), "s3://bucket/a/b.tar");
}

// ---------------------------------------------------------------- resolve_s3_config

TEST(S3Config, DefaultsWithNothingSet) {
  S3Config c = Env().resolve();
  EXPECT_EQ(c.endpoint, "https://s3.us-east-1.amazonaws.com");
  EXPECT_EQ(c.region, "us-east-1");
  EXPECT_FALSE(c.path_style);
  EXPECT_TRUE(c.credentials.empty());
  EXPECT_EQ(c.credentials.source, "none: unsigned requests");

  // A HOME without .aws files: the same.
  Home home;
  std::filesystem::remove_all(home.path() + "/.aws");
  c = Env().set("HOME", home.path()).resolve();
  EXPECT_TRUE(c.credentials.empty());
  EXPECT_EQ(c.credentials.source, "none: unsigned requests");
}

TEST(S3Config, EndpointServiceSpecificWins) {
  S3Config c =
      Env().set("AWS_ENDPOINT_URL", "http://generic:1").set("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000/").resolve();
  EXPECT_EQ(c.endpoint, "http://127.0.0.1:9000");
  EXPECT_TRUE(c.path_style);
  c = Env().set("AWS_ENDPOINT_URL", "HTTPS://minio.local").resolve();
  EXPECT_EQ(c.endpoint, "https://minio.local");
  EXPECT_TRUE(c.path_style);
  // Empty counts as unset.
  c = Env().set("AWS_ENDPOINT_URL_S3", "").set("AWS_ENDPOINT_URL", "http://generic:1").resolve();
  EXPECT_EQ(c.endpoint, "http://generic:1");
  // The default endpoint follows the region.
  c = Env().set("AWS_REGION", "eu-west-3").resolve();
  EXPECT_EQ(c.endpoint, "https://s3.eu-west-3.amazonaws.com");
  EXPECT_FALSE(c.path_style);
}

TEST(S3Config, BadEndpoints) {
  std::string m = resolve_error(Env().set("AWS_ENDPOINT_URL_S3", "127.0.0.1:9000"));
  EXPECT_NE(m.find("AWS_ENDPOINT_URL_S3"), std::string::npos) << m;
  EXPECT_NE(m.find("'127.0.0.1:9000'"), std::string::npos) << m;
  m = resolve_error(Env().set("AWS_ENDPOINT_URL", "http://host/path"));
  EXPECT_NE(m.find("AWS_ENDPOINT_URL 'http://host/path'"), std::string::npos) << m;
  m = resolve_error(Env().set("AWS_ENDPOINT_URL", "http://"));
  EXPECT_NE(m.find("no host"), std::string::npos) << m;
  m = resolve_error(Env().set("AWS_ENDPOINT_URL", "http://user:Pa55word@host"));
  EXPECT_EQ(m.find("Pa55word"), std::string::npos) << m;
}

TEST(S3Config, RegionOrder) {
  Home home;
  home.write(home.config(), "[default]\nregion = ap-south-1\n");
  Env env;
  env.set("HOME", home.path());
  EXPECT_EQ(env.resolve().region, "ap-south-1");
  env.set("AWS_DEFAULT_REGION", "eu-central-1");
  EXPECT_EQ(env.resolve().region, "eu-central-1");
  env.set("AWS_REGION", "us-west-2");
  S3Config c = env.resolve();
  EXPECT_EQ(c.region, "us-west-2");
  EXPECT_EQ(c.endpoint, "https://s3.us-west-2.amazonaws.com");
  EXPECT_EQ(Env().set("AWS_DEFAULT_REGION", "eu-north-1").resolve().region, "eu-north-1");
  EXPECT_EQ(Env().resolve().region, "us-east-1");
  // A region that would break the host name or the "aws:amz:<region>:s3" signing string.
  std::string m = resolve_error(Env().set("AWS_REGION", "us:east"));
  EXPECT_NE(m.find("'us:east' from AWS_REGION"), std::string::npos) << m;
}

TEST(S3Config, EnvironmentKeys) {
  S3Config c = Env()
                   .set("AWS_ACCESS_KEY_ID", "AKIAENV")
                   .set("AWS_SECRET_ACCESS_KEY", "envsecret")
                   .set("AWS_SESSION_TOKEN", "envtoken")
                   .resolve();
  EXPECT_EQ(c.credentials.access_key, "AKIAENV");
  EXPECT_EQ(c.credentials.secret_key, "envsecret");
  EXPECT_EQ(c.credentials.session_token, "envtoken");
  EXPECT_EQ(c.credentials.source, "environment (AWS_ACCESS_KEY_ID)");
  EXPECT_FALSE(c.credentials.empty());
}

TEST(S3Config, EnvironmentKeysWinOverProfile) {
  Home home;
  home.write(home.credentials(), "[default]\naws_access_key_id = AKIAFILE\naws_secret_access_key = filesecret\n");
  S3Config c = Env()
                   .set("HOME", home.path())
                   .set("AWS_ACCESS_KEY_ID", "AKIAENV")
                   .set("AWS_SECRET_ACCESS_KEY", "envsecret")
                   .resolve();
  EXPECT_EQ(c.credentials.access_key, "AKIAENV");
  EXPECT_EQ(c.credentials.secret_key, "envsecret");
  EXPECT_EQ(c.credentials.session_token, "");
  EXPECT_EQ(c.credentials.source, "environment (AWS_ACCESS_KEY_ID)");

  // With keys and a region in the environment the profile is not consulted, so a refused or a
  // missing one does not matter.
  home.write(home.config(), "[default]\nrole_arn = arn:aws:iam::1:role/x\nsource_profile = default\n");
  c = Env()
          .set("HOME", home.path())
          .set("AWS_PROFILE", "nowhere")
          .set("AWS_REGION", "us-east-2")
          .set("AWS_ACCESS_KEY_ID", "AKIAENV")
          .set("AWS_SECRET_ACCESS_KEY", "envsecret")
          .resolve();
  EXPECT_EQ(c.credentials.access_key, "AKIAENV");
}

TEST(S3Config, OneKeyWithoutTheOther) {
  std::string m = resolve_error(Env().set("AWS_ACCESS_KEY_ID", "AKIAENV"));
  EXPECT_NE(m.find("AWS_SECRET_ACCESS_KEY is not"), std::string::npos) << m;
  m = resolve_error(Env().set("AWS_SECRET_ACCESS_KEY", "SuperSecretValue").set("AWS_SESSION_TOKEN", "TokenValue"));
  EXPECT_NE(m.find("AWS_ACCESS_KEY_ID is not"), std::string::npos) << m;
  EXPECT_EQ(m.find("SuperSecretValue"), std::string::npos) << m;
  EXPECT_EQ(m.find("TokenValue"), std::string::npos) << m;

  // Likewise in a file.
  Home home;
  home.write(home.credentials(), "[default]\naws_secret_access_key = FileSecretValue\n");
  m = resolve_error(Env().set("HOME", home.path()));
  EXPECT_NE(m.find("profile 'default' in " + home.credentials()), std::string::npos) << m;
  EXPECT_NE(m.find("no aws_access_key_id"), std::string::npos) << m;
  EXPECT_EQ(m.find("FileSecretValue"), std::string::npos) << m;
}

TEST(S3Config, ProfileSelection) {
  Home home;
  home.write(home.credentials(),
             "# written by the test\n"
             "[default]\n"
             "aws_access_key_id = AKIADEFAULT\n"
             "aws_secret_access_key = defaultsecret\n"
             "\n"
             "[train]\n"
             "  ; indented comment\n"
             "aws_access_key_id=AKIATRAIN   \n"
             "aws_secret_access_key   =   train/secret+with=signs  \r\n"
             "aws_session_token = traintoken\n");
  Env env;
  env.set("HOME", home.path());
  S3Config c = env.resolve();
  EXPECT_EQ(c.credentials.access_key, "AKIADEFAULT");
  EXPECT_EQ(c.credentials.secret_key, "defaultsecret");
  EXPECT_EQ(c.credentials.source, "profile 'default' in " + home.credentials());

  env.set("AWS_PROFILE", "train");
  c = env.resolve();
  EXPECT_EQ(c.credentials.access_key, "AKIATRAIN");
  EXPECT_EQ(c.credentials.secret_key, "train/secret+with=signs");
  EXPECT_EQ(c.credentials.session_token, "traintoken");
  EXPECT_EQ(c.credentials.source, "profile 'train' in " + home.credentials());
  EXPECT_EQ(c.region, "us-east-1");
}

TEST(S3Config, ConfigFileSectionsNeedTheProfilePrefix) {
  Home home;
  home.write(home.config(),
             "[x]\n"
             "aws_access_key_id = AKIAPLAINX\n"
             "aws_secret_access_key = plainx\n"
             "[ profile   y ]\n"
             "aws_access_key_id = AKIAY\n"
             "aws_secret_access_key = ysecret\n"
             "region = eu-west-1\n"
             "[default]\n"
             "aws_access_key_id = AKIACONFIGDEFAULT\n"
             "aws_secret_access_key = configdefault\n");
  Env env;
  env.set("HOME", home.path());
  // [default] counts in the config file without "profile ".
  S3Config c = env.resolve();
  EXPECT_EQ(c.credentials.access_key, "AKIACONFIGDEFAULT");
  EXPECT_EQ(c.credentials.source, "profile 'default' in " + home.config());

  env.set("AWS_PROFILE", "y");
  c = env.resolve();
  EXPECT_EQ(c.credentials.access_key, "AKIAY");
  EXPECT_EQ(c.credentials.secret_key, "ysecret");
  EXPECT_EQ(c.region, "eu-west-1");
  EXPECT_EQ(c.endpoint, "https://s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(c.credentials.source, "profile 'y' in " + home.config());

  // [x] in the config file is not profile x: x exists in neither file.
  env.set("AWS_PROFILE", "x");
  std::string m = resolve_error(env);
  EXPECT_NE(m.find("AWS_PROFILE='x'"), std::string::npos) << m;
  EXPECT_NE(m.find(home.credentials() + " (missing)"), std::string::npos) << m;
  EXPECT_NE(m.find(home.config()), std::string::npos) << m;
  EXPECT_EQ(m.find("plainx"), std::string::npos) << m;
}

TEST(S3Config, RegionFromConfigKeysFromCredentials) {
  Home home;
  home.write(home.credentials(), "[train]\naws_access_key_id = AKIATRAIN\naws_secret_access_key = trainsecret\n");
  home.write(home.config(),
             "[profile train]\n"
             "s3 =\n"
             "    region = not-this-one\n"
             "    addressing_style = path\n"
             "region = ap-northeast-1\n"
             "output = json\n");
  S3Config c = Env().set("HOME", home.path()).set("AWS_PROFILE", "train").resolve();
  EXPECT_EQ(c.region, "ap-northeast-1");
  EXPECT_EQ(c.credentials.access_key, "AKIATRAIN");
  EXPECT_EQ(c.credentials.source, "profile 'train' in " + home.credentials());
  // The environment's region still wins.
  c = Env().set("HOME", home.path()).set("AWS_PROFILE", "train").set("AWS_DEFAULT_REGION", "sa-east-1").resolve();
  EXPECT_EQ(c.region, "sa-east-1");
}

TEST(S3Config, FileLocationsFromTheEnvironment) {
  Home home;
  const std::string creds = home.path() + "/my-creds";
  const std::string config = home.path() + "/my-config";
  home.write(creds, "[p]\naws_access_key_id = AKIAP\naws_secret_access_key = psecret\n");
  home.write(config, "[profile p]\nregion = ca-central-1\n");
  S3Config c =
      Env().set("AWS_SHARED_CREDENTIALS_FILE", creds).set("AWS_CONFIG_FILE", config).set("AWS_PROFILE", "p").resolve();
  EXPECT_EQ(c.credentials.access_key, "AKIAP");
  EXPECT_EQ(c.region, "ca-central-1");
  EXPECT_EQ(c.credentials.source, "profile 'p' in " + creds);
  // "~/" is HOME.
  c = Env().set("HOME", home.path()).set("AWS_SHARED_CREDENTIALS_FILE", "~/my-creds").set("AWS_PROFILE", "p").resolve();
  EXPECT_EQ(c.credentials.access_key, "AKIAP");
}

TEST(S3Config, MissingExplicitProfileNamesBothFiles) {
  Home home;
  home.write(home.credentials(), "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = s\n");
  home.write(home.config(), "[default]\nregion = us-east-2\n");
  std::string m = resolve_error(Env().set("HOME", home.path()).set("AWS_PROFILE", "nope"));
  EXPECT_NE(m.find("'nope'"), std::string::npos) << m;
  EXPECT_NE(m.find(home.credentials()), std::string::npos) << m;
  EXPECT_NE(m.find(home.config()), std::string::npos) << m;
  // Without AWS_PROFILE a missing default profile means unsigned requests.
  Home empty;
  empty.write(empty.credentials(), "[other]\naws_access_key_id = AKIAO\naws_secret_access_key = o\n");
  S3Config c = Env().set("HOME", empty.path()).resolve();
  EXPECT_TRUE(c.credentials.empty());
  EXPECT_EQ(c.credentials.source, "none: unsigned requests");
  // A profile with only a region signs nothing either.
  empty.write(empty.config(), "[profile r]\nregion = eu-south-1\n");
  c = Env().set("HOME", empty.path()).set("AWS_PROFILE", "r").resolve();
  EXPECT_TRUE(c.credentials.empty());
  EXPECT_EQ(c.region, "eu-south-1");
}

TEST(S3Config, RefusedProfiles) {
  struct Case {
    std::string config;
    std::string key;
  };
  const Case cases[] = {
      {"[profile train]\nrole_arn = arn:aws:iam::123456789012:role/Train\nsource_profile = base\n", "role_arn"},
      {"[profile train]\nsso_session = corp\nsso_account_id = 123456789012\nsso_role_name = R\n", "sso_"},
      {"[profile train]\ncredential_process = /usr/bin/get-creds --secret ProcessSecretArg\n", "credential_process"},
  };
  for (const Case& k : cases) {
    Home home;
    // Static keys beside them are not used either: botocore would assume the role first.
    home.write(home.credentials(),
               "[train]\naws_access_key_id = AKIATRAIN\naws_secret_access_key = VerySecretKey\n"
               "aws_session_token = VerySecretToken\n");
    home.write(home.config(), k.config);
    std::string m = resolve_error(Env().set("HOME", home.path()).set("AWS_PROFILE", "train"));
    EXPECT_NE(m.find("profile 'train' in " + home.config()), std::string::npos) << m;
    EXPECT_NE(m.find(k.key), std::string::npos) << m;
    EXPECT_NE(m.find("aws configure export-credentials --profile train --format env"), std::string::npos) << m;
    EXPECT_EQ(m.find("VerySecretKey"), std::string::npos) << m;
    EXPECT_EQ(m.find("VerySecretToken"), std::string::npos) << m;
    EXPECT_EQ(m.find("ProcessSecretArg"), std::string::npos) << m;
  }
  // In the credentials file too.
  Home home;
  home.write(home.credentials(),
             "[default]\ncredential_process = helper\naws_access_key_id = A\naws_secret_access_key = VerySecretKey\n");
  std::string m = resolve_error(Env().set("HOME", home.path()));
  EXPECT_NE(m.find("profile 'default' in " + home.credentials()), std::string::npos) << m;
  EXPECT_EQ(m.find("VerySecretKey"), std::string::npos) << m;
}

// ---------------------------------------------------------------- URLs

TEST(S3Encode, KnownVectors) {
  EXPECT_EQ(uri_encode("a b", false), "a%20b");
  EXPECT_EQ(uri_encode("a+b", false), "a%2Bb");
  EXPECT_EQ(uri_encode("AZaz09-_.~", false), "AZaz09-_.~");
  EXPECT_EQ(uri_encode("\xC3\xA9t\xC3\xA9", false), "%C3%A9t%C3%A9");  // "été"
  EXPECT_EQ(uri_encode("a/b/c", true), "a/b/c");
  EXPECT_EQ(uri_encode("a/b/c", false), "a%2Fb%2Fc");
  EXPECT_EQ(uri_encode("*=&?#%:@,;$!'()[]", false), "%2A%3D%26%3F%23%25%3A%40%2C%3B%24%21%27%28%29%5B%5D");
  EXPECT_EQ(uri_encode(std::string_view("\0\x7f\xff", 3), false), "%00%7F%FF");
  EXPECT_EQ(uri_encode("", true), "");
}

S3Config path_config() {
  S3Config c;
  c.endpoint = "http://127.0.0.1:9000";
  c.region = "us-east-1";
  c.path_style = true;
  return c;
}

S3Config aws_config() {
  S3Config c;
  c.endpoint = "https://s3.us-west-2.amazonaws.com";
  c.region = "us-west-2";
  c.path_style = false;
  return c;
}

TEST(S3Urls, ObjectUrl) {
  EXPECT_EQ(s3_object_url(path_config(), S3Url{"stoker-test", "a/b c+~.tar"}),
            "http://127.0.0.1:9000/stoker-test/a/b%20c%2B~.tar");
  EXPECT_EQ(s3_object_url(aws_config(), S3Url{"bucket", "train/000000.tar"}),
            "https://bucket.s3.us-west-2.amazonaws.com/train/000000.tar");
  EXPECT_EQ(s3_object_url(aws_config(), S3Url{"bucket", "d\xC3\xA9j\xC3\xA0/x y"}),
            "https://bucket.s3.us-west-2.amazonaws.com/d%C3%A9j%C3%A0/x%20y");
  // A bucket with a '.' stays path-style (TLS wildcards do not cover it).
  EXPECT_EQ(s3_object_url(aws_config(), S3Url{"my.bucket", "k"}), "https://s3.us-west-2.amazonaws.com/my.bucket/k");
}

TEST(S3Urls, ListUrl) {
  EXPECT_EQ(s3_list_url(path_config(), "b", "train/", "a/b=c+", 1000),
            "http://127.0.0.1:9000/b?continuation-token=a%2Fb%3Dc%2B&list-type=2&max-keys=1000&prefix=train%2F");
  EXPECT_EQ(s3_list_url(path_config(), "b", "train/shard-", ""),
            "http://127.0.0.1:9000/b?list-type=2&prefix=train%2Fshard-");
  EXPECT_EQ(s3_list_url(path_config(), "b", "", "", 0), "http://127.0.0.1:9000/b?list-type=2&prefix=");
  EXPECT_EQ(s3_list_url(aws_config(), "bucket", "a b/", "tok", 5),
            "https://bucket.s3.us-west-2.amazonaws.com/?continuation-token=tok&list-type=2&max-keys=5&prefix=a%20b%2F");
  EXPECT_EQ(s3_list_url(aws_config(), "my.bucket", "p", ""),
            "https://s3.us-west-2.amazonaws.com/my.bucket?list-type=2&prefix=p");
}

TEST(S3Urls, FromResolvedConfig) {
  S3Config c = Env().set("AWS_ENDPOINT_URL_S3", "http://localhost:4569/").resolve();
  S3Url u;
  ASSERT_TRUE(parse_s3_url("s3://stoker-test/train/000.tar", &u).ok());
  EXPECT_EQ(s3_object_url(c, u), "http://localhost:4569/stoker-test/train/000.tar");
  c = Env().set("AWS_REGION", "eu-west-1").resolve();
  EXPECT_EQ(s3_object_url(c, u), "https://stoker-test.s3.eu-west-1.amazonaws.com/train/000.tar");
}

// ---------------------------------------------------------------- listings

constexpr char kS3rverListing[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
    "xmlns=\"http://doc.s3.amazonaws.com/2006-03-01/\"><Name>stoker-test</Name><Prefix>a/</Prefix><KeyCount>1</"
    "KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated><Contents><Key>a/f.txt</"
    "Key><LastModified>2026-12-04T17:01:50.000Z</LastModified><ETag>&quot;b1946ac92492d2347c6235b4d2611184&quot;</"
    "ETag><Size>6</Size><StorageClass>STANDARD</StorageClass></Contents></ListBucketResult>";

TEST(S3List, S3rverResponse) {
  S3ListPage page;
  Status st = parse_s3_list(kS3rverListing, &page);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_FALSE(page.truncated);
  EXPECT_EQ(page.next_token, "");
  ASSERT_EQ(page.objects.size(), 1u);
  EXPECT_EQ(page.objects[0].key, "a/f.txt");
  EXPECT_EQ(page.objects[0].size, 6u);
  EXPECT_EQ(page.objects[0].etag, "\"b1946ac92492d2347c6235b4d2611184\"");
}

TEST(S3List, TruncatedPageWithSeveralObjects) {
  // Pretty-printed as AWS documents it, with a namespace prefix-free root carrying attributes.
  const std::string xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/" data-note='a > b / c'>
  <Name>bucket</Name>
  <Prefix>train/</Prefix>
  <KeyCount>3</KeyCount>
  <MaxKeys>3</MaxKeys>
  <IsTruncated> true </IsTruncated>
  <!-- a comment -->
  <Contents>
    <Key>train/000000.tar</Key>
    <LastModified>2024-01-01T00:00:00.000Z</LastModified>
    <ETag>"aaa"</ETag>
    <Size>268435456</Size>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
  <Contents>
    <Key>train/000001.tar</Key>
    <ETag>&quot;bbb-2&quot;</ETag>
    <Size>
      18446744073709551615
    </Size>
  </Contents>
  <Contents><Key>train/000002.tar</Key><Size>0</Size><ETag>"ccc"</ETag><Owner><ID>x</ID></Owner></Contents>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
  <ContinuationToken>previous</ContinuationToken>
</ListBucketResult>
)";
  S3ListPage page;
  Status st = parse_s3_list(xml, &page);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(page.truncated);
  EXPECT_EQ(page.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
  ASSERT_EQ(page.objects.size(), 3u);
  EXPECT_EQ(page.objects[0].key, "train/000000.tar");
  EXPECT_EQ(page.objects[0].size, 268435456u);
  EXPECT_EQ(page.objects[0].etag, "\"aaa\"");
  EXPECT_EQ(page.objects[1].key, "train/000001.tar");
  EXPECT_EQ(page.objects[1].size, 18446744073709551615u);
  EXPECT_EQ(page.objects[1].etag, "\"bbb-2\"");
  EXPECT_EQ(page.objects[2].key, "train/000002.tar");
  EXPECT_EQ(page.objects[2].size, 0u);
  // The token feeds the next request, encoded.
  EXPECT_EQ(s3_list_url(path_config(), "bucket", "train/", page.next_token),
            "http://127.0.0.1:9000/bucket?continuation-token=1ueGcxLPRx1Tr%2FXYExHnhbYLgveDs2J%2Fwm36Hy4vbOwM%3D"
            "&list-type=2&prefix=train%2F");
}

TEST(S3List, EntitiesInKeys) {
  const std::string xml =
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<Contents><Key>a&amp;b &lt;c&gt; &apos;d&apos; &quot;e&quot; &#65;&#x42;&#xe9;&#x1F600;</Key>"
      "<Size>1</Size><ETag>\"x\"</ETag></Contents>"
      "<Contents><Key> lead and trail </Key><Size>2</Size><ETag>\"y\"</ETag></Contents>"
      "<Contents><Key><![CDATA[raw & <kept>]]></Key><Size>3</Size><ETag>\"z\"</ETag></Contents>"
      "</ListBucketResult>";
  S3ListPage page;
  Status st = parse_s3_list(xml, &page);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(page.objects.size(), 3u);
  EXPECT_EQ(page.objects[0].key, "a&b <c> 'd' \"e\" AB\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(page.objects[1].key, " lead and trail ");  // keys are not trimmed
  EXPECT_EQ(page.objects[2].key, "raw & <kept>");
}

TEST(S3List, EmptyListing) {
  S3ListPage page;
  page.objects.push_back(S3Object{"stale", 1, "\"e\""});
  Status st = parse_s3_list(
      "<ListBucketResult xmlns=\"x\"><Name>b</Name><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated>"
      "</ListBucketResult>",
      &page);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(page.objects.empty());
  EXPECT_FALSE(page.truncated);
}

TEST(S3List, MalformedIsCorrupt) {
  auto contents = [](const std::string& inner) {
    return "<ListBucketResult><IsTruncated>false</IsTruncated><Contents>" + inner + "</Contents></ListBucketResult>";
  };
  struct Case {
    std::string xml;
    std::string says;
  };
  const Case cases[] = {
      {contents("<Key>k</Key><ETag>\"e\"</ETag>"), "no <Size> for 'k'"},
      {contents("<Key>k</Key><Size>12x</Size><ETag>\"e\"</ETag>"), "<Size> of 'k' is '12x'"},
      {contents("<Key>k</Key><Size>-1</Size><ETag>\"e\"</ETag>"), "<Size> of 'k' is '-1'"},
      {contents("<Key>k</Key><Size></Size><ETag>\"e\"</ETag>"), "<Size> of 'k' is ''"},
      {contents("<Key>k</Key><Size>18446744073709551616</Size><ETag>\"e\"</ETag>"), "not a byte count"},
      {contents("<Size>1</Size><ETag>\"e\"</ETag>"), "<Contents> #1 has no <Key>"},
      {contents("<Key>k</Key><Size>1</Size>"), "no <ETag> for 'k'"},
      {"<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>", "no <IsTruncated>"},
      {"<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>", "'yes', not true or false"},
      {"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>", "no <NextContinuationToken>"},
      {"<ListAllMyBucketsResult></ListAllMyBucketsResult>", "not <ListBucketResult>"},
      {"<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>",
       "NoSuchBucket: The specified bucket does not exist"},
      {"", "no root element"},
      {"not xml at all", "no root element"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated>", "no </ListBucketResult>"},
      {"<ListBucketResult><IsTruncated>false</Truncated></ListBucketResult>", "</Truncated> closes <IsTruncated>"},
      {contents("<Key>a &nbsp; b</Key><Size>1</Size><ETag>e</ETag>"), "unknown entity &nbsp;"},
      {contents("<Key>a & b</Key><Size>1</Size><ETag>e</ETag>"), "'&' without an entity"},
      {contents("<Key>&#0;</Key><Size>1</Size><ETag>e</ETag>"), "bad character reference"},
      {contents("<Key>&#xD800;</Key><Size>1</Size><ETag>e</ETag>"), "bad character reference"},
      {contents("<Key>&#x110000;</Key><Size>1</Size><ETag>e</ETag>"), "bad character reference"},
      {"<ListBucketResult a=\"unterminated></ListBucketResult>", "unterminated attribute"},
      {"<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult><x/>", "after the root"},
  };
  for (const Case& k : cases) {
    S3ListPage page;
    Status st = parse_s3_list(k.xml, &page);
    EXPECT_EQ(st.code(), Code::kCorrupt) << k.xml;
    EXPECT_NE(st.message().find(k.says), std::string::npos) << k.xml << "\n -> " << st.message();
  }
  // Deep nesting is refused, not recursed into.
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "<a>";
  S3ListPage page;
  Status st = parse_s3_list(deep, &page);
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(st.message().find("nested deeper"), std::string::npos) << st.message();
  // Cut anywhere, the s3rver listing never parses as a whole one.
  const std::string full = kS3rverListing;
  for (std::size_t n = 0; n < full.size(); ++n) {
    EXPECT_FALSE(parse_s3_list(full.substr(0, n), &page).ok()) << n;
  }
}

// ---------------------------------------------------------------- errors

TEST(S3Error, ParsesCodeAndMessage) {
  const std::string body =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>The request "
      "signature we calculated does not match the signature you provided. Check your key and signing "
      "method.</Message><AWSAccessKeyId>S3RVER</AWSAccessKeyId><StringToSign>AWS4...</StringToSign></Error>";
  EXPECT_EQ(parse_s3_error(body),
            "SignatureDoesNotMatch: The request signature we calculated does not match the signature you provided. "
            "Check your key and signing method.");
  EXPECT_EQ(parse_s3_error("<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>"
                           "<Key>a/b</Key><RequestId>1</RequestId></Error>"),
            "NoSuchKey: The specified key does not exist.");
  EXPECT_EQ(parse_s3_error("<Error>\n  <Code>AccessDenied</Code>\n</Error>\n"), "AccessDenied");
  EXPECT_EQ(parse_s3_error("<Error><Code>X</Code><Message>a &lt;b&gt; &amp; c</Message></Error>"), "X: a <b> & c");
  const std::string long_message(2000, 'm');
  EXPECT_EQ(parse_s3_error("<Error><Code>X</Code><Message>" + long_message + "</Message></Error>"),
            "X: " + long_message.substr(0, 512) + "...");
}

TEST(S3Error, NotAnErrorGivesEmpty) {
  EXPECT_EQ(parse_s3_error(kS3rverListing), "");
  EXPECT_EQ(parse_s3_error(""), "");
  EXPECT_EQ(parse_s3_error("<html><body>502 Bad Gateway</body></html>"), "");
  EXPECT_EQ(parse_s3_error("Service Unavailable"), "");
  EXPECT_EQ(parse_s3_error("<Error><Message>no code</Message></Error>"), "");
  EXPECT_EQ(parse_s3_error("<Error><Code>NoSuchKey</Code>"), "");  // cut short
}

// ---------------------------------------------------------------- globs

TEST(S3Glob, Prefix) {
  EXPECT_EQ(s3_glob_prefix("train/shard-*.tar"), "train/shard-");
  EXPECT_EQ(s3_glob_prefix("a/b?c/*.tar"), "a/b");
  EXPECT_EQ(s3_glob_prefix("x/[0-9]*.tar"), "x/");
  EXPECT_EQ(s3_glob_prefix("*.tar"), "");
  EXPECT_EQ(s3_glob_prefix("plain/key.tar"), "plain/key.tar");
  EXPECT_EQ(s3_glob_prefix(""), "");
  EXPECT_EQ(s3_glob_prefix("lit\\*eral*"), "lit");  // an escape ends the literal prefix too
}

TEST(S3Glob, Matching) {
  EXPECT_TRUE(s3_key_matches("train/*.tar", "train/000.tar"));
  EXPECT_FALSE(s3_key_matches("train/*.tar", "train/sub/000.tar"));  // '*' does not cross '/'
  EXPECT_FALSE(s3_key_matches("train/*.tar", "train/000.tar.idx"));
  EXPECT_TRUE(s3_key_matches("*/*.tar", "a/b.tar"));
  EXPECT_FALSE(s3_key_matches("*.tar", "a/b.tar"));
  EXPECT_FALSE(s3_key_matches("a?b", "a/b"));  // nor does '?'
  EXPECT_TRUE(s3_key_matches("a?b", "axb"));
  EXPECT_TRUE(s3_key_matches("s-[0-9][0-9].tar", "s-07.tar"));
  EXPECT_FALSE(s3_key_matches("s-[0-9][0-9].tar", "s-7a.tar"));
  EXPECT_TRUE(s3_key_matches("lit\\*eral", "lit*eral"));
  EXPECT_TRUE(s3_key_matches("plain/key.tar", "plain/key.tar"));
  // Every key a pattern matches starts with its prefix.
  for (const std::string p : {"train/shard-*.tar", "x/[0-9]*.tar", "a?b*", "lit\\*eral*"}) {
    for (const std::string k : {"train/shard-1.tar", "x/5.tar", "axb", "lit*eral.tar", "litXeral"}) {
      if (s3_key_matches(p, k)) {
        EXPECT_EQ(k.compare(0, s3_glob_prefix(p).size(), s3_glob_prefix(p)), 0) << p << " " << k;
      }
    }
  }
}

}  // namespace
}  // namespace stoker::detail
