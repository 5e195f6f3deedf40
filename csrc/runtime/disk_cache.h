// The persistent compile cache: serialized executables on disk, one file per key.
// A serialized executable is code, so the directory must belong to the user and be writable by
// nobody else; writes are atomic (write + rename); a per-key lock file makes concurrent processes
// compile a program once; a truncated or corrupt entry is a miss (and is replaced), never a crash;
// least-recently-used entries are evicted past a size cap. Entries carry a magic, a format
// version and a size, and any change in layout bumps the version.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace tpu::rt {

struct DiskCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t corrupt = 0;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
};

class DiskCache {
 public:
  // Opens (creating, mode 0700) `dir`. Returns null and sets `warning` when the directory is not
  // private to the user (a serialized executable is code) or cannot be created.
  static std::unique_ptr<DiskCache> Open(const std::string& dir, int64_t max_bytes,
                                         std::string* warning);

  // Holds the per-key lock while alive.
  class Lock {
   public:
    explicit Lock(int fd) : fd_(fd) {}
    ~Lock();
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

   private:
    int fd_;
  };
  std::unique_ptr<Lock> LockKey(const std::string& key);

  // The entry's payload, or nullopt (missing, truncated or corrupt: corrupt ones are removed).
  std::optional<std::string> Load(const std::string& key);
  void Store(const std::string& key, const std::string& payload);
  void Remove(const std::string& key);
  DiskCacheStats stats() const;
  const std::string& dir() const { return dir_; }

 private:
  DiskCache(std::string dir, int64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  std::string PathOf(const std::string& key, const char* ext) const;
  // Scans the directory, evicts least recently used entries past the cap; returns the total.
  int64_t Evict();

  std::string dir_;
  int64_t max_bytes_;
  std::atomic<int64_t> hits_{0}, misses_{0}, corrupt_{0}, read_{0}, written_{0};
  // Bytes on disk as last scanned plus what this process wrote since: the directory is only
  // rescanned when this passes the cap, so a store costs O(1), not a directory listing.
  std::atomic<int64_t> approx_total_{-1};
};

// 64-bit content hash of a file (the plugin's identity in cache keys); 0 if unreadable.
uint64_t FileHash(const std::string& path);
// 64-bit hash of bytes.
uint64_t BytesHash(const void* data, size_t n, uint64_t seed = 0);

}  // namespace tpu::rt
