#include "lookup_cache.h"

#include <pthread.h>

#include <vector>

namespace chameleon::shim {

__thread LookupCache* t_lookup_cache __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

// Caches of exited threads, reused by new ones: a program that starts many short-lived threads
// holds as many caches as it has threads alive at once, not one per thread it ever started.
// Leaked on purpose (like Runtime): thread exits may run after static destructors.
struct CachePool {
  std::mutex mu;
  std::vector<LookupCache*> free;
  pthread_key_t key{};
  bool key_ok = false;
};

CachePool& Pool() {
  static CachePool* pool = [] {
    auto* p = new CachePool();
    p->key_ok = pthread_key_create(&p->key, [](void* cache) {
                  t_lookup_cache = nullptr;
                  CachePool& pool = Pool();
                  const std::lock_guard<std::mutex> lock(pool.mu);
                  pool.free.push_back(static_cast<LookupCache*>(cache));
                }) == 0;
    return p;
  }();
  return *pool;
}

}  // namespace

std::mutex& LookupCachePoolMutex() { return Pool().mu; }

LookupCache* AcquireThreadLookupCache() {
  CachePool& pool = Pool();
  LookupCache* cache = nullptr;
  {
    const std::lock_guard<std::mutex> lock(pool.mu);
    if (!pool.free.empty()) {
      cache = pool.free.back();
      pool.free.pop_back();
    }
  }
  if (cache != nullptr) {
    cache->Clear();
  } else {
    cache = new LookupCache();
  }
  // Without a key (no more keys in the process) the cache stays with the thread for good.
  if (pool.key_ok) pthread_setspecific(pool.key, cache);
  t_lookup_cache = cache;
  return cache;
}

}  // namespace chameleon::shim
