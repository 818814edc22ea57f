#include "chameleon/topology/pci_bus_id.h"

#include <cctype>
#include <cstdio>

namespace chameleon::topology {
namespace {

// Parses `digits` hex digits at `*s`, advancing it; false when fewer are there.
bool Hex(std::string_view* s, std::size_t digits, unsigned long* value) {
  if (s->size() < digits) return false;
  unsigned long v = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>((*s)[i])));
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    v = v * 16 + static_cast<unsigned long>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  s->remove_prefix(digits);
  *value = v;
  return true;
}

bool Separator(std::string_view* s, char c) {
  if (s->empty() || s->front() != c) return false;
  s->remove_prefix(1);
  return true;
}

}  // namespace

std::string NormalizePciBusId(std::string_view text, std::string* out) {
  std::string_view s = text;
  unsigned long domain = 0, bus = 0, device = 0, function = 0;
  // CUDA writes a 4-digit domain, NVML's legacy busId an 8-digit one: both name one device.
  const std::size_t domain_digits = s.find(':') == 8 ? 8 : 4;
  const bool ok = Hex(&s, domain_digits, &domain) && Separator(&s, ':') && Hex(&s, 2, &bus) &&
                  Separator(&s, ':') && Hex(&s, 2, &device) && Separator(&s, '.') &&
                  Hex(&s, 1, &function) && s.empty();
  if (!ok || domain > 0xffff || device > 0x1f || function > 7)
    return "PCI bus id '" + std::string(text.substr(0, 32)) + "' is not dddd:bb:dd.f";
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04lx:%02lx:%02lx.%lx", domain, bus, device, function);
  *out = buf;
  return "";
}

}  // namespace chameleon::topology
