// The libjpeg error manager shared by the decoder and pack's encoder:
// errors longjmp back to the caller's setjmp with the message kept.
#pragma once

// clang-format off
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>
// clang-format on

namespace stoker::detail {

struct LibjpegError {
  jpeg_error_mgr pub;  // first: libjpeg sees a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  // The first warning that means pixels are missing (0: none); reset by
  // the caller before each image.
  int data_warning;
  char warning[JMSG_LENGTH_MAX];
};

// Installs LibjpegError's handlers (errors longjmp; no message is printed;
// data warnings are kept in data_warning); returns the pointer for cinfo->err.
jpeg_error_mgr* install_libjpeg_error(LibjpegError* err);

}  // namespace stoker::detail
