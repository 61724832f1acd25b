# dsv4go Makefile. The default Go build needs nothing from here (pure Go).
#
# CUDA backend (package kernels/cuda, build tag `cuda`):
#   make cuda            build kernels/cuda/lib/libdsv4cuda.a (+ a copy of libcudart_static.a)
#                        with nvcc, then `go build -tags cuda ./...`
#   make cuda-bins       also build the carried test and benchmark binaries into out/cuda/
#                        (stripped: the device tool carries at most 64 MiB with the tree)
#   make cuda-tools      the standalone GPU tools of tools/ into out/cuda/ (part of cuda-bins)
#   make cuda-test       run the conformance suite on this machine's GPU (relinked library)
# Variables: CUDA_HOME (a toolkit: bin/nvcc, include/, lib64/ or lib/ with libcudart_static.a;
# default: /usr/local/cuda, or the pip-installed wheels of .ci/cuda-build),
# CUDA_ARCHS (default 90; e.g. "90 100a 120a" adds Blackwell targets), NVCC_FLAGS.

PIP_CUDA   := $(HOME)/.cache/dsv4go/cuda-13.0.88/nvidia/cu13
CUDA_HOME  ?= $(if $(wildcard /usr/local/cuda/bin/nvcc),/usr/local/cuda,$(PIP_CUDA))
NVCC       ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCHS ?= 90
NVCC_FLAGS ?= -O3 -std=c++17 -Xcompiler -fPIC
CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64/libcudart_static.a $(CUDA_HOME)/lib/libcudart_static.a $(CUDA_HOME)/targets/x86_64-linux/lib/libcudart_static.a))

CUDA_DIR  := kernels/cuda
CUDA_SRCS := $(wildcard $(CUDA_DIR)/csrc/*.cu)
CUDA_OBJS := $(patsubst $(CUDA_DIR)/csrc/%.cu,$(CUDA_DIR)/lib/obj/%.o,$(CUDA_SRCS))
CUDA_LIB  := $(CUDA_DIR)/lib/libdsv4cuda.a
GENCODE   := $(foreach a,$(CUDA_ARCHS),-gencode=arch=compute_$(a),code=sm_$(a)) \
             -gencode=arch=compute_$(firstword $(CUDA_ARCHS)),code=compute_$(firstword $(CUDA_ARCHS))

.PHONY: cuda cuda-lib cuda-bins cuda-tools cuda-vet cuda-test cuda-clean

cuda-lib: $(CUDA_LIB) $(CUDA_DIR)/lib/libcudart_static.a

$(CUDA_DIR)/lib/obj/%.o: $(CUDA_DIR)/csrc/%.cu $(CUDA_DIR)/csrc/dsv4cuda.h $(wildcard $(CUDA_DIR)/csrc/*.h $(CUDA_DIR)/csrc/*.cuh)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $(GENCODE) -c $< -o $@ 2>$@.err || { cat $@.err >&2; exit 1; }
	@$(WGMMA_CHECK) $@.err || { rm -f $@; exit 1; }

# WGMMA_CHECK LOG prints nvcc's messages in LOG and fails if ptxas serialized a wgmma (the
# C751x family, e.g. C7513: non-wgmma instructions defining its input registers): such a
# kernel loses its tensor-core overlap (session 8: FP8-block large M 70 -> 100 us).
WGMMA_CHECK = sh -c 'cat "$$1" >&2; if grep -Eq "C751[0-9]|wgmma.mma_async instructions are serialized" "$$1"; then echo "ptxas serialized wgmma (see above): fix the kernel" >&2; exit 1; fi' --

# Per-file targets: qgemm_large.cu holds Hopper wgmma kernels, which exist only for sm_90a (not
# sm_90, nor later chips); qgemm.cu calls them only on compute capability 9.0 devices.
$(CUDA_DIR)/lib/obj/qgemm_large.o: GENCODE = -gencode=arch=compute_90a,code=sm_90a

$(CUDA_LIB): $(CUDA_OBJS)
	ar rcs $@ $^

$(CUDA_DIR)/lib/libcudart_static.a:
	@test -n "$(CUDA_LIBDIR)" || { echo "libcudart_static.a not found under CUDA_HOME=$(CUDA_HOME)"; exit 1; }
	@mkdir -p $(dir $@)
	cp $(CUDA_LIBDIR) $@

cuda: cuda-lib
	$(CUDA_GOENV) go build -tags cuda ./...

cuda-vet: cuda-lib
	go vet -tags cuda ./kernels/cuda/...

# The conformance suite on this machine's GPU (skips without one), linked against the freshly
# built library (a plain `go test -tags cuda` may reuse a test binary linked against an older one).
cuda-test: cuda-lib
	$(CUDA_GOENV) go test -tags cuda ./kernels/cuda

# Go's build cache does not see libdsv4cuda.a (it enters through #cgo LDFLAGS), so a
# rebuilt library would not be relinked: the library's hash goes into CGO_LDFLAGS (an
# absolute symbol nothing references), which Go does hash.
CUDA_LIB_HASH = $(shell cat $(CUDA_LIB) $(CUDA_DIR)/lib/libcudart_static.a 2>/dev/null | sha256sum | cut -c1-16)
CUDA_GOENV    = CGO_LDFLAGS="$${CGO_LDFLAGS:--O2 -g} -Wl,--defsym=dsv4cuda_lib_$(CUDA_LIB_HASH)=0"

# The standalone CUDA tools of tools/ (run on the GPU machine). Two of them compile kernel
# sources of the library directly, so .ci/cuda-build builds them too: stream_trace called an old
# signature of dsv4c_qgemv_stream for a whole session before anyone noticed.
CUDA_TOOLS = out/cuda/ceiling out/cuda/decode_probe out/cuda/stream_trace out/cuda/large_parts out/cuda/large_trace out/cuda/xlat out/cuda/floor out/cuda/clusters
CUDA_TOOL_DEPS = $(wildcard $(CUDA_DIR)/csrc/*.cu $(CUDA_DIR)/csrc/*.cuh $(CUDA_DIR)/csrc/*.h) tools/cuda_check.h tools/cuda_large_bufs.h
CUDA_TOOL_L    = $(if $(CUDA_LIBDIR),-L$(dir $(CUDA_LIBDIR)))
cuda-tools: $(CUDA_TOOLS)

out/cuda/ceiling: tools/cuda_ceiling.cu $(CUDA_TOOL_DEPS)
	@mkdir -p out/cuda
	$(NVCC) -O3 -std=c++17 $(GENCODE) $(CUDA_TOOL_L) -o $@ $<
out/cuda/xlat: tools/cuda_xlat.cu tools/cuda_check.h
	@mkdir -p out/cuda
	$(NVCC) -O3 -std=c++17 $(GENCODE) $(CUDA_TOOL_L) -o $@ $<
out/cuda/decode_probe: tools/cuda_decode_probe.cu $(CUDA_TOOL_DEPS)
	@mkdir -p out/cuda
	$(NVCC) -O3 -std=c++17 $(GENCODE) $(CUDA_TOOL_L) -I$(CUDA_DIR)/csrc -o $@ $<
out/cuda/floor: tools/cuda_floor.cu tools/cuda_check.h
	@mkdir -p out/cuda
	$(NVCC) -O3 -std=c++17 $(GENCODE) $(CUDA_TOOL_L) -o $@ $<
out/cuda/clusters: tools/cuda_clusters.cu
	@mkdir -p out/cuda
	$(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a $(CUDA_TOOL_L) -o $@ $<
out/cuda/stream_trace: tools/cuda_stream_trace.cu $(CUDA_TOOL_DEPS)
	@mkdir -p out/cuda
	$(NVCC) -O3 -std=c++17 $(GENCODE) $(CUDA_TOOL_L) -I$(CUDA_DIR)/csrc -o $@ $<
out/cuda/large_parts: tools/cuda_large_parts.cu $(CUDA_TOOL_DEPS)
	@mkdir -p out/cuda
	$(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a $(CUDA_TOOL_L) -I$(CUDA_DIR)/csrc -Itools -o $@ $< 2>out/cuda/large_parts.err || { cat out/cuda/large_parts.err >&2; exit 1; }
	@$(WGMMA_CHECK) out/cuda/large_parts.err
out/cuda/large_trace: tools/cuda_large_trace.cu $(CUDA_TOOL_DEPS)
	@mkdir -p out/cuda
	$(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a $(CUDA_TOOL_L) -I$(CUDA_DIR)/csrc -Itools -o $@ $< 2>out/cuda/large_trace.err || { cat out/cuda/large_trace.err >&2; exit 1; }

# Binaries carried to the GPU machine (out/ is git-ignored), stripped: the device tool carries at
# most 64 MiB.
cuda-bins: cuda-lib cuda-tools
	@mkdir -p out/cuda
	$(CUDA_GOENV) go test -c -tags cuda -o out/cuda/kernels-cuda.test ./kernels/cuda
	$(CUDA_GOENV) go build -tags cuda -o out/cuda/cudabench ./kernels/cuda/cmd/cudabench
	strip out/cuda/kernels-cuda.test out/cuda/cudabench $(CUDA_TOOLS)

cuda-clean:
	rm -rf $(CUDA_DIR)/lib out/cuda
