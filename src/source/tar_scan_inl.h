// scan_tar's template body (included by tar.h).
#pragma once

#include <cstring>

namespace stoker::detail {

template <typename ReadAt>
Status scan_tar(ReadAt&& read_at, std::uint64_t file_size, const std::string& shard, std::vector<TarMember>* out) {
  out->clear();
  std::uint8_t block[512];
  std::uint64_t pos = 0;
  std::string long_name, pax_path;
  std::uint64_t pax_size = UINT64_MAX;
  bool have_long_name = false, have_pax_path = false;
  auto where = [&](std::uint64_t at) { return shard + ": offset " + std::to_string(at) + ": "; };
  for (;;) {
    if (pos + 512 > file_size) {
      return Status::Corrupt(where(pos) + "truncated tar (no end-of-archive block; the file is " +
                             std::to_string(file_size) + " bytes)");
    }
    if (read_at(block, 512, pos) != 512) return Status::IOError(where(pos) + "cannot read the tar header");
    TarHeader h;
    std::string err;
    if (!parse_tar_header(block, &h, &err).ok()) return Status::Corrupt(where(pos) + err);
    if (h.end) return Status::Ok();  // tools write two zero blocks; one is enough to stop
    const std::uint64_t data = pos + 512;
    if (h.size > file_size || data + h.size > file_size) {
      return Status::Corrupt(where(pos) + "member '" + h.name + "' of " + std::to_string(h.size) +
                             " bytes runs past the end of the file (" + std::to_string(file_size) + " bytes)");
    }
    const std::uint64_t next = data + (h.size + 511) / 512 * 512;
    if (h.type == 'L' || h.type == 'x') {
      const std::uint64_t cap = h.type == 'L' ? kMaxTarLongName : kMaxTarPaxHeader;
      if (h.size > cap) return Status::Corrupt(where(pos) + "extended header of " + std::to_string(h.size) + " bytes");
      std::string buf(static_cast<std::size_t>(h.size), '\0');
      if (h.size && read_at(reinterpret_cast<std::uint8_t*>(buf.data()), static_cast<std::size_t>(h.size), data) !=
                        static_cast<long long>(h.size)) {
        return Status::IOError(where(data) + "cannot read an extended header");
      }
      if (h.type == 'L') {
        long_name = buf.substr(0, buf.find('\0'));
        have_long_name = true;
      } else if (!parse_pax(buf, &pax_path, &pax_size)) {
        return Status::Corrupt(where(pos) + "malformed pax extended header");
      } else {
        have_pax_path = !pax_path.empty();
      }
      pos = next;
      continue;
    }
    std::string name = have_pax_path ? pax_path : (have_long_name ? long_name : h.name);
    std::uint64_t size = h.size;
    if (pax_size != UINT64_MAX) {
      size = pax_size;
      if (data + size > file_size) {
        return Status::Corrupt(where(pos) + "member '" + name + "' of " + std::to_string(size) +
                               " bytes (pax size) runs past the end of the file");
      }
    }
    const std::uint64_t member_next = data + (size + 511) / 512 * 512;
    if (h.type == '0' || h.type == '\0' || h.type == '7') out->push_back({name, data, size});
    have_long_name = have_pax_path = false;
    pax_path.clear();
    pax_size = UINT64_MAX;
    pos = member_next;
  }
}

}  // namespace stoker::detail
