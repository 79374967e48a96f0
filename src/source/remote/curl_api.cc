// libcurl through dlopen: see curl_api.h.
#include "source/remote/curl_api.h"

#include <dlfcn.h>

#include <mutex>

namespace stoker::detail {
namespace {

template <typename F>
void bind(void* lib, const char* name, F* f, std::string* missing) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  if (!*f) *missing += std::string(missing->empty() ? "" : ", ") + name;
}

}  // namespace

const CurlApi& curl() {
  static CurlApi api;
  static std::string error;
  static std::once_flag once;
  // NOTE: curl_global_init is not thread-safe before 7.84 and must run before
  // any other curl call: call_once does it on first use, before any fetch thread.
  std::call_once(once, [] {
    void* lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* why = dlerror();
      error = std::string("remote shards need libcurl (libcurl.so.4: ") + (why ? why : "not found") +
              "); install it: apt-get install libcurl4";
      return;
    }
    std::string missing;
    bind(lib, "curl_global_init", &api.global_init, &missing);
    bind(lib, "curl_easy_init", &api.easy_init, &missing);
    bind(lib, "curl_easy_setopt", &api.easy_setopt, &missing);
    bind(lib, "curl_easy_perform", &api.easy_perform, &missing);
    bind(lib, "curl_easy_getinfo", &api.easy_getinfo, &missing);
    bind(lib, "curl_easy_cleanup", &api.easy_cleanup, &missing);
    bind(lib, "curl_easy_reset", &api.easy_reset, &missing);
    bind(lib, "curl_easy_strerror", &api.easy_strerror, &missing);
    bind(lib, "curl_slist_append", &api.slist_append, &missing);
    bind(lib, "curl_slist_free_all", &api.slist_free_all, &missing);
    bind(lib, "curl_version_info", &api.version_info, &missing);
    if (!missing.empty()) {
      error = "libcurl.so.4 lacks " + missing;
      return;
    }
    const curl_version_info_data* v = api.version_info(CURLVERSION_NOW);
    api.version_num = v->version_num;
    api.version = v->version;
    if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) error = "curl_global_init failed";
  });
  if (!error.empty()) throw Error(Code::kUnsupported, error);
  return api;
}

}  // namespace stoker::detail
