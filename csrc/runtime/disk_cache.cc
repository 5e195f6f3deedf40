#include "runtime/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

namespace tpu::rt {

namespace {

constexpr char kMagic[8] = {'T', 'P', 'U', 'X', 'L', 'A', 0, 1};
constexpr uint32_t kFormatVersion = 1;

// On-disk entry header (little-endian host layout; the version guards any change).
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  uint64_t payload_size;
  uint64_t payload_hash;
};

bool ReadAll(int fd, void* dst, size_t n) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteAll(int fd, const void* src, size_t n) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Creates every missing component of `dir`; the last one private (0700).
bool MakeDirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      std::string part = dir.substr(0, i);
      if (::mkdir(part.c_str(), i == dir.size() ? 0700 : 0755) != 0 && errno != EEXIST) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

uint64_t BytesHash(const void* data, size_t n, uint64_t seed) {
  // Word-at-a-time multiply-xor mixing: fast enough to hash a 260 MB plugin at start-up.
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ seed ^ (n * 0xff51afd7ed558ccdULL);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ (w * 0xc4ceb9fe1a85ec53ULL)) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

uint64_t FileHash(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st {};
  uint64_t h = 0;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      h = BytesHash(m, static_cast<size_t>(st.st_size));
      ::munmap(m, static_cast<size_t>(st.st_size));
    }
  }
  ::close(fd);
  return h;
}

std::unique_ptr<DiskCache> DiskCache::Open(const std::string& dir, int64_t max_bytes,
                                           std::string* warning) {
  if (!MakeDirs(dir)) {
    *warning = "cannot create the compile cache directory " + dir + ": " + std::strerror(errno);
    return nullptr;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *warning = "the compile cache path " + dir + " is not a directory";
    return nullptr;
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    *warning = "the compile cache directory " + dir +
               " is writable by other users or not owned by you; cached executables are code, "
               "so the persistent cache is disabled (chmod 700 it or set TORCHTPU_CACHE_DIR)";
    return nullptr;
  }
  return std::unique_ptr<DiskCache>(new DiskCache(dir, max_bytes));
}

DiskCache::Lock::~Lock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

std::string DiskCache::PathOf(const std::string& key, const char* ext) const {
  return dir_ + "/" + key + ext;
}

std::unique_ptr<DiskCache::Lock> DiskCache::LockKey(const std::string& key) {
  int fd = ::open(PathOf(key, ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) ::flock(fd, LOCK_EX);
  return std::make_unique<Lock>(fd);
}

std::optional<std::string> DiskCache::Load(const std::string& key) {
  std::string path = PathOf(key, ".xla");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    misses_++;
    return std::nullopt;
  }
  Header h{};
  std::string payload;
  bool ok = ReadAll(fd, &h, sizeof(h)) && std::memcmp(h.magic, kMagic, 8) == 0 &&
            h.version == kFormatVersion && h.header_size == sizeof(Header) &&
            h.payload_size < (int64_t{1} << 40);
  if (ok) {
    payload.resize(h.payload_size);
    ok = ReadAll(fd, payload.data(), payload.size()) &&
         BytesHash(payload.data(), payload.size()) == h.payload_hash;
    char extra;
    ok = ok && ::read(fd, &extra, 1) == 0;  // no trailing bytes
  }
  ::close(fd);
  if (!ok) {
    corrupt_++;
    misses_++;
    ::unlink(path.c_str());
    return std::nullopt;
  }
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recently used, for eviction
  hits_++;
  read_ += static_cast<int64_t>(payload.size());
  return payload;
}

void DiskCache::Store(const std::string& key, const std::string& payload) {
  std::mt19937_64 rng(std::random_device{}());
  std::string tmp = dir_ + "/.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rng());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return;  // a cache that cannot be written is only a slower cache
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kFormatVersion;
  h.header_size = sizeof(Header);
  h.payload_size = payload.size();
  h.payload_hash = BytesHash(payload.data(), payload.size());
  bool ok = WriteAll(fd, &h, sizeof(h)) && WriteAll(fd, payload.data(), payload.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), PathOf(key, ".xla").c_str()) != 0) {
    ::unlink(tmp.c_str());
    return;
  }
  written_ += static_cast<int64_t>(payload.size());
  int64_t size = static_cast<int64_t>(payload.size() + sizeof(Header));
  if (approx_total_.load() < 0) approx_total_ = Evict();
  if ((approx_total_ += size) > max_bytes_) approx_total_ = Evict();
}

void DiskCache::Remove(const std::string& key) { ::unlink(PathOf(key, ".xla").c_str()); }

int64_t DiskCache::Evict() {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return 0;
  struct Entry {
    std::string path;
    int64_t size;
    int64_t mtime;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".xla") != 0) continue;
    std::string path = dir_ + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;
    entries.push_back({path, st.st_size,
                       static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
    total += st.st_size;
  }
  ::closedir(d);
  if (total <= max_bytes_) return total;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.mtime < b.mtime; });
  for (const Entry& e : entries) {
    if (total <= max_bytes_) break;
    if (::unlink(e.path.c_str()) == 0) total -= e.size;
  }
  return total;
}

DiskCacheStats DiskCache::stats() const {
  return {hits_.load(), misses_.load(), corrupt_.load(), read_.load(), written_.load()};
}

}  // namespace tpu::rt
