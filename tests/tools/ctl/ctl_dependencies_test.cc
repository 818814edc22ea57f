// chameleonctl needs only the control client (chameleon::control, on ipc): the daemon's libraries
// must not be among the binary's DT_NEEDED entries, read here from its ELF dynamic section.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

/// The DT_NEEDED names of the 64-bit ELF file at `path`; empty when it is not one or has none.
std::vector<std::string> NeededLibraries(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::vector<std::string> needed;
  Elf64_Ehdr eh{};
  if (bytes.size() < sizeof(eh)) return needed;
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) {
    return needed;
  }
  auto section = [&](std::size_t index) {
    Elf64_Shdr sh{};
    const std::size_t at = eh.e_shoff + index * sizeof(Elf64_Shdr);
    if (index < eh.e_shnum && at + sizeof(sh) <= bytes.size()) {
      std::memcpy(&sh, bytes.data() + at, sizeof(sh));
    }
    return sh;
  };
  for (std::size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr dynamic = section(i);
    if (dynamic.sh_type != SHT_DYNAMIC) continue;
    const Elf64_Shdr strings = section(dynamic.sh_link);
    for (std::size_t at = dynamic.sh_offset;
         at + sizeof(Elf64_Dyn) <= dynamic.sh_offset + dynamic.sh_size &&
         at + sizeof(Elf64_Dyn) <= bytes.size();
         at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry{};
      std::memcpy(&entry, bytes.data() + at, sizeof(entry));
      if (entry.d_tag == DT_NULL) break;
      const std::size_t name = strings.sh_offset + entry.d_un.d_val;
      if (entry.d_tag == DT_NEEDED && name < bytes.size()) needed.emplace_back(bytes.data() + name);
    }
  }
  return needed;
}

TEST(ChameleonctlDependencies, ShouldNeedNoneOfTheDaemonsLibraries) {
  const std::vector<std::string> needed = NeededLibraries(CHAMELEONCTL_PATH);
  // The reader found the dynamic section: every dynamically linked program needs libc.
  bool libc = false;
  for (const std::string& lib : needed) libc |= lib.rfind("libc.so", 0) == 0;
  ASSERT_TRUE(libc) << "no DT_NEEDED libc.so in " << CHAMELEONCTL_PATH;
  for (const std::string& lib : needed) {
    for (const char* daemon_only : {"libuv", "prometheus", "yaml-cpp", "libsystemd", "spdlog"}) {
      EXPECT_EQ(lib.find(daemon_only), std::string::npos) << CHAMELEONCTL_PATH << " needs " << lib;
    }
  }
}

}  // namespace
