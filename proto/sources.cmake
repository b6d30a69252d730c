# The hand-written sources of verdict_proto, in one list: proto/CMakeLists.txt builds them into the
# library and tests/fuzz/CMakeLists.txt compiles them again with the sanitizers.
set(VERDICT_PROTO_SOURCES body_check.cc problem.cc validation.cc wire.cc)
