// The precompiled headers' own translation unit: the headers are in cmake/precompiled_headers.cmake.
