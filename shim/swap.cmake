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

# Tests run against simgpu's libcuda.so.1, dlopened from its build path.
set(CHAMELEON_SWAP_TEST_DIR ${CMAKE_SOURCE_DIR}/tests/shim/swap)
if(TARGET chameleon_simgpu AND EXISTS ${CHAMELEON_SWAP_TEST_DIR})
  set(CHAMELEON_SWAP_TEST_DEFS CHAMELEON_SIMGPU_LIB="$<TARGET_FILE:chameleon_simgpu>")
  # Deterministic logic and data tests: also under ASan+UBSan and TSan.
  chameleon_test(NAME shim_swap_test
    SOURCES ${CHAMELEON_SWAP_TEST_DIR}/engine_test.cc ${CHAMELEON_SWAP_TEST_DIR}/runner_test.cc
            ${CHAMELEON_SWAP_TEST_DIR}/duplex_test.cc
            # One test per part of the engine (shim/src/swap/*.h).
            ${CHAMELEON_SWAP_TEST_DIR}/allocation_table_test.cc
            ${CHAMELEON_SWAP_TEST_DIR}/va_mapper_test.cc
            ${CHAMELEON_SWAP_TEST_DIR}/free_range_cache_test.cc
            ${CHAMELEON_SWAP_TEST_DIR}/unmap_batcher_test.cc
            ${CHAMELEON_SWAP_TEST_DIR}/transfer_scheduler_test.cc
            ${CHAMELEON_SWAP_TEST_DIR}/evictor_test.cc
            ${CHAMELEON_SWAP_TEST_DIR}/allocator_test.cc
            ${CHAMELEON_SWAP_TEST_DIR}/host_mapper_test.cc
            ${CHAMELEON_SWAP_TEST_DIR}/residency_manager_test.cc
            ${CHAMELEON_SWAP_TEST_DIR}/adopted_ranges_test.cc
    LIBS chameleon::swap chameleon::simgpu_headers ${CMAKE_DL_LIBS}
    LABELS sanitize concurrent
    TIMEOUT 60)
  target_compile_definitions(shim_swap_test PRIVATE ${CHAMELEON_SWAP_TEST_DEFS})
  add_dependencies(shim_swap_test chameleon_simgpu)
  # Touches unmapped memory on purpose (simgpu's fault guard): plain build only.
  chameleon_test(NAME shim_swap_fault_test
    SOURCES ${CHAMELEON_SWAP_TEST_DIR}/fault_test.cc
    LIBS chameleon::swap chameleon::simgpu_headers ${CMAKE_DL_LIBS}
    TIMEOUT 60)
  target_compile_definitions(shim_swap_fault_test PRIVATE ${CHAMELEON_SWAP_TEST_DEFS})
  add_dependencies(shim_swap_fault_test chameleon_simgpu)
endif()
