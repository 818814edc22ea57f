#include "symbols.h"

namespace chameleon::shim {

// Each exported wrapper, seen here only as an address. The asm label binds to the exact exported
// name; -Bsymbolic-functions keeps the reference inside libchameleon.so.
extern "C" {
#define CHAMELEON_SYMBOL(name, base, version, per_thread) \
  void ChameleonWrapperRef_##name() __asm__(#name);
#include "symbols.inc"
#undef CHAMELEON_SYMBOL
}

void* WrapperAddress(SymbolId id) {
  static void* const kAddresses[kSymbolCount] = {
#define CHAMELEON_SYMBOL(name, base, version, per_thread) \
  reinterpret_cast<void*>(&ChameleonWrapperRef_##name),
#include "symbols.inc"
#undef CHAMELEON_SYMBOL
  };
  return id < kSymbolCount ? kAddresses[id] : nullptr;
}

}  // namespace chameleon::shim
