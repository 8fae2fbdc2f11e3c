# mok_set_warnings(target): the warning set every target of the project compiles with.
function(mok_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-sign-compare>)
endfunction()
