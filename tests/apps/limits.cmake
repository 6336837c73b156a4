# Issue 38: limits checked before the work. Each test fails on the code before the issue (a
# std::bad_alloc after a long load, an abort, or gigabytes held for a bad line).
set(skew_limits_env "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# skew_limit_test(NAME "MESSAGE REGEX" TIMEOUT_S SHELL_COMMAND): the command (run by sh in the
# test's own directory, apps in $APPS) prints the message within the timeout.
# A command under `ulimit` is not registered in a sanitizer build: ASan's shadow memory needs far
# more address space and heap than the limits allow, and its allocator aborts instead of throwing.
function(skew_limit_test name regex timeout command)
  if(SKEW_SANITIZE AND command MATCHES "ulimit")
    return()
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/limits/${name})
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME ${name} COMMAND sh -c "${command}" WORKING_DIRECTORY ${dir})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} PASS_REGULAR_EXPRESSION "${regex}"
    ENVIRONMENT "${skew_limits_env};APPS=${CMAKE_BINARY_DIR}/apps")
endfunction()
if(TARGET wide_train)
  # 268435456 features x (1 + 1024) floats x 4 B = 1.0 TiB, and AdaGrad's state as much: refused
  # before any data is read (on main: std::bad_alloc after 20 s of counting features).
  skew_limit_test(wide_train_model_beyond_memory
    "wide_train needs 2\\.0 TiB \\(model \\(268435456 features x 1025 floats\\) 1\\.0 TiB \\+ optimizer state \\(adagrad\\) 1\\.0 TiB\\) but only .* are available \\(MemAvailable in /proc/meminfo\\): lower model\\.features \\(or data\\.hash_bits\\) or model\\.k" 10
    "$APPS/wide_train --model.k=1024 --model.features=268435456 2>&1")
  # A cap the model alone exceeds: 1 + 1000000 x 9 floats = 34.3 MiB, twice with AdaGrad's state.
  skew_limit_test(wide_train_model_beyond_max_memory
    "needs 68\\.7 MiB \\(model \\(1000000 features x 9 floats\\) 34\\.3 MiB \\+ optimizer state \\(adagrad\\) 34\\.3 MiB\\) but data\\.max_memory_mb = 10 allows 10\\.0 MiB: lower model\\.features \\(or data\\.hash_bits\\) or model\\.k, or raise data\\.max_memory_mb" 10
    "$APPS/wide_train --model.k=8 --model.features=1000000 --data.max_memory_mb=10 2>&1")
  # A data file loaded whole counts its bytes: a sparse file of 8 TiB (no disk used).
  skew_limit_test(wide_train_data_beyond_memory
    "wide_train needs 8\\.0 TiB \\(big\\.libsvm loaded whole \\(about its file size\\) 8\\.0 TiB\\) but only .* are available \\(MemAvailable in /proc/meminfo\\): set data\\.max_memory_mb > 0 to stream data\\.train" 10
    "truncate -s 8T big.libsvm && $APPS/wide_train --data.train=big.libsvm 2>&1; rm -f big.libsvm")
  # A line beyond data.max_line_bytes is refused with file:line before it is parsed: a 128 MiB line
  # of NUL bytes under a 600 MB heap limit (on main: std::bad_alloc, the message copying it). The
  # heap (ulimit -d), not the address space: a CUDA build's libraries alone map most of 600 MB.
  skew_limit_test(wide_train_line_beyond_bound
    "nul\\.libsvm:3:1: a line of 134217728 bytes, longer than data\\.max_line_bytes = 16777216" 60
    "printf '1 1:1\\n0 2:1\\n' > nul.libsvm && head -c 134217728 /dev/zero >> nul.libsvm && (ulimit -d 600000; $APPS/wide_train --data.train=nul.libsvm --data.cache=false 2>&1); rm -f nul.libsvm")
  skew_limit_test(wide_train_line_bound_skips
    "skipped 1 malformed line\\(s\\) of 3; first: long\\.libsvm:2:1: a line of 100 bytes, longer than data\\.max_line_bytes = 64" 60
    "printf '1 1:1\\n0 2:1 3:1 4:1 5:1 6:1 7:1 8:1 9:1 10:1 11:1 12:1 13:1 14:1 15:1 16:1 17:1 18:1 19:1 20:1 2:1 2:1 2:1\\n1 3:1\\n' > long.libsvm && $APPS/wide_train --data.train=long.libsvm --data.valid= --data.cache=false --data.max_line_bytes=64 --data.skip_bad_lines=true --train.epochs=1 2>&1")
endif()
if(TARGET moe_train)
  # /dev/zero never ends: refused before a byte is read (on main: std::bad_alloc after ~36 s of
  # reading into one string).
  skew_limit_test(moe_train_text_device
    "text file '/dev/zero' is a device, not a file: it would be read without end" 10
    "$APPS/moe_train --data.train=/dev/zero 2>&1")
  # A regular file larger than data.max_memory_mb: refused by its size, with the model's estimate
  # (about 13 MiB at the defaults), before it is read (a sparse file: no disk used).
  skew_limit_test(moe_train_text_beyond_max_memory
    "moe_train needs [0-9.]+ MiB \\(parameters and gradients .* \\+ text big\\.txt 100\\.0 MiB\\) but data\\.max_memory_mb = 64 allows 64\\.0 MiB: lower model\\.d_model, .*, or give a smaller text file, or raise data\\.max_memory_mb" 10
    "truncate -s 100M big.txt && $APPS/moe_train --data.train=big.txt --data.max_memory_mb=64 2>&1; rm -f big.txt")
  # A pipe has no size: the model fits the cap, and the text is refused once it has sent more.
  skew_limit_test(moe_train_text_pipe_beyond_max_memory
    "moe_train needs 6[45]\\.[0-9] MiB \\(text .* \\(so far\\) 6[45]\\.[0-9] MiB\\) but data\\.max_memory_mb = 64 allows 64\\.0 MiB" 10
    "rm -f p && mkfifo p && (head -c 70000000 /dev/zero > p &) && $APPS/moe_train --data.train=p --data.max_memory_mb=64 2>&1; rm -f p")
  # The model is estimated from its keys before it is built or the text read: a text that is a
  # FIFO nobody writes would block any read, so the error comes first or the test times out.
  # d_model 65536: 4 x 65536^2 attention values a block, 512 GiB with gradients and moments.
  skew_limit_test(moe_train_model_beyond_memory
    "moe_train needs [0-9.]+ (GiB|TiB) \\(parameters and gradients \\([0-9]+ dense \\+ [0-9]+ expert values\\) [0-9.]+ GiB \\+ AdamW's two moments [0-9.]+ GiB \\+ activations of train\\.batch_size = 8 .* \\+ text t [0-9]+ bytes\\) but only .* are available \\(MemAvailable in /proc/meminfo\\): lower model\\.d_model, model\\.layers, moe\\.num_experts \\(or launch more ranks\\), moe\\.d_ff, model\\.d_ff, train\\.batch_size or model\\.seq_len" 10
    "rm -f t && mkfifo t && $APPS/moe_train --data.train=t --model.d_model=65536 2>&1; rm -f t")
  # 65536 experts of 2 x 64 x 4096 + 4096 + 64 values in each of 2 layers, with gradients and moments: 1 TiB.
  skew_limit_test(moe_train_experts_beyond_memory
    "moe_train needs 1\\.[0-9] TiB \\(parameters and gradients \\([0-9]+ dense \\+ 69264736256 expert values\\).* but only .* are available" 10
    "rm -f t && mkfifo t && $APPS/moe_train --data.train=t --moe.num_experts=65536 --moe.d_ff=4096 2>&1; rm -f t")
  # A cap below the model alone: the default model's estimate against data.max_memory_mb = 4.
  skew_limit_test(moe_train_model_beyond_max_memory
    "moe_train needs [0-9.]+ MiB \\(parameters and gradients .*\\) but data\\.max_memory_mb = 4 allows 4\\.0 MiB: lower model\\.d_model" 10
    "$APPS/moe_train --data.max_memory_mb=4 2>&1")
endif()
# Thread counts: a count far beyond the CPUs is refused naming the key; a thread that cannot be
# started (1 GB stacks under a 4 GB address space) is an error naming the key, not
# "terminate called without an active exception"; OpenBLAS's count is capped with a warning.
if(TARGET wide_train)
  skew_limit_test(wide_train_threads_beyond_cpus
    "train\\.threads = 1024 is more than 8 threads per CPU of this machine's [0-9]+ \\(at most [0-9]+\\): lower train\\.threads" 10
    "$APPS/wide_train --train.threads=1024 2>&1")
  skew_limit_test(wide_train_thread_start_failure
    "cannot start thread [0-9]+ of [0-9]+ \\(train\\.threads = [0-9]+\\): Resource temporarily unavailable; lower train\\.threads" 60
    "n=$(( $(nproc) * 8 )); ulimit -s 1000000 && ulimit -v 4000000 && $APPS/wide_train --train.threads=$n --train.epochs=1 2>&1")
endif()
if(TARGET moe_train)
  skew_limit_test(moe_train_blas_threads_capped
    "WARN\\] train\\.blas_threads = 1024 is more than 8 threads per CPU of this machine's [0-9]+: using [0-9]+" 60
    "$APPS/moe_train --train.blas_threads=1024 --train.iterations=1 2>&1")
endif()
# An allocation that fails anyway names what it was for (here under a 2.5 GB address space, with a
# model the MemAvailable check lets through: 1e8 features x 3 floats, 1.1 GiB, and its AdaGrad state).
if(TARGET wide_train)
  skew_limit_test(wide_train_allocation_named
    "error: out of memory allocating the (model's parameters|trainer's optimizer state and buffers) \\(100000000 features x 3 floats( each)?\\) \\(1\\.1 GiB\\)" 120
    "ulimit -v 2500000 && $APPS/wide_train --model.features=100000000 --model.k=2 --train.epochs=1 2>&1")
endif()
if(TARGET moe_train)
  # d_model 2048: about 3 GiB by moe_train's estimate, which MemAvailable lets through on most
  # machines (4096's 11 GiB would be refused up front where less is available), and more than
  # the 1.5 GB address space.
  skew_limit_test(moe_train_allocation_named
    "error: out of memory allocating the model \\(model\\.arch = gpt, model\\.d_model = 2048, model\\.layers = 8, moe\\.num_experts = 4 over 1 ranks\\): out of host memory allocating [0-9]+ bytes" 120
    "ulimit -v 1500000 && $APPS/moe_train --model.d_model=2048 --model.layers=8 --train.iterations=1 2>&1")
endif()
# preduce_train estimates its workers' models and its data before it reads or generates any: an
# MNIST directory whose train.csv is a FIFO nobody writes would block a read, so the error comes
# first or the test times out. 100000 simulated workers x 20037642 floats x 3 arrays: 22 TiB.
if(TARGET preduce_train)
  skew_limit_test(preduce_train_workers_beyond_memory
    "preduce_train needs [0-9.]+ TiB \\(100000 worker\\(s\\) x parameters, gradient and accumulator \\(20037642 floats each\\) [0-9.]+ TiB \\+ initial model and group sum .* \\+ MNIST from m .*\\) but only .* are available \\(MemAvailable in /proc/meminfo\\): lower model\\.hidden, sim\\.workers" 10
    "mkdir -p m && rm -f m/train.csv && mkfifo m/train.csv && touch m/test.csv && $APPS/preduce_train --simulate --sim.workers=100000 --data.source=mnist --data.mnist_dir=m --model.hidden=4096,4096 2>&1; rm -rf m")
  # An FM over 2^30 features of 1 + 1024 floats: 4 TiB in one MPI worker.
  skew_limit_test(preduce_train_wide_beyond_memory
    "preduce_train needs [0-9.]+ TiB \\(1 worker\\(s\\) x parameters, gradient and accumulator \\(1100585369601 floats each\\).* \\+ synthetic CTR rows \\(data\\.rows \\+ data\\.test_rows\\) .*\\) but only .* are available \\(MemAvailable in /proc/meminfo\\): lower data\\.ctr_features or model\\.k, data\\.rows or data\\.test_rows" 10
    "$APPS/preduce_train --model.kind=fm --data.source=synthetic_ctr --data.ctr_features=1073741824 --model.k=1024 2>&1")
endif()
