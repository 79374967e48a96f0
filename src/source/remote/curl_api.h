// libcurl, loaded at run time (dlopen "libcurl.so.4"), so that stoker and its
// wheel need libcurl only where remote shards are read.
#pragma once

#include <curl/curl.h>

#include <string>

#include "stoker/status.h"

namespace stoker::detail {

// The libcurl functions stoker calls. Loaded once (curl_global_init done);
// curl() throws Error(kUnsupported) naming the library and how to install it
// when it cannot be loaded.
struct CurlApi {
  CURLcode (*global_init)(long);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_cleanup)(CURL*);
  void (*easy_reset)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
  curl_version_info_data* (*version_info)(CURLversion);
  unsigned version_num = 0;  // 0x078801 for 7.88.1
  std::string version;       // "7.88.1"
};

const CurlApi& curl();

}  // namespace stoker::detail
