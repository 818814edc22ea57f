# The swap executor (shim/src/swap/, docs/executor.md): a static library the shim links, tested
# on its own against simgpu. Included from shim/CMakeLists.txt.

file(GLOB CHAMELEON_SWAP_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/src/swap/*.cc)
add_library(chameleon_swap STATIC ${CHAMELEON_SWAP_SOURCES})
# Linked into libchameleon.so.
set_target_properties(chameleon_swap PROPERTIES POSITION_INDEPENDENT_CODE ON
                      CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
add_library(chameleon::swap ALIAS chameleon_swap)
target_include_directories(chameleon_swap PUBLIC ${CMAKE_CURRENT_LIST_DIR}/src)
target_link_libraries(chameleon_swap PUBLIC chameleon::ipc chameleon::cuda_headers Threads::Threads)
chameleon_warnings(chameleon_swap)
# Its tests are registered in tests/shim/CMakeLists.txt.
