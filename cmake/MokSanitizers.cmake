# MOK_SANITIZE: build every target with the compiler's sanitizers, e.g.
#   -DMOK_SANITIZE=address,undefined   (tools/sanitize_tests.sh: ASan + UBSan, build-asan/)
#   -DMOK_SANITIZE=thread              (TSan, build-tsan/; not combinable with address)
# Undefined behaviour stops the program (-fno-sanitize-recover) so a test fails on the
# first finding instead of printing a line nobody reads. Frame pointers and line tables
# keep the reports readable at -O2.
set(MOK_SANITIZE "" CACHE STRING "Sanitizers to build with: address,undefined | thread | empty for none")

if(MOK_SANITIZE)
  string(REPLACE "," ";" _mok_sanitizers "${MOK_SANITIZE}")
  if("address" IN_LIST _mok_sanitizers AND "thread" IN_LIST _mok_sanitizers)
    message(FATAL_ERROR "MOK_SANITIZE: address and thread cannot be combined")
  endif()
  set(_mok_sanitize_flags -fsanitize=${MOK_SANITIZE} -fno-omit-frame-pointer -g1)
  if("undefined" IN_LIST _mok_sanitizers)
    list(APPEND _mok_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_mok_sanitize_flags}>")
  add_link_options(${_mok_sanitize_flags})
  message(STATUS "Sanitizers: ${MOK_SANITIZE}")
endif()

# MOK_FUZZ: the fuzz targets (tests/fuzz/) as libFuzzer binaries. Needs clang; every target
# is compiled with coverage for libFuzzer (fuzzer-no-link), so the fuzzer sees into the core.
option(MOK_FUZZ "Build the fuzz targets as libFuzzer binaries (clang)" OFF)
if(MOK_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "MOK_FUZZ needs clang: configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>")
endif()
