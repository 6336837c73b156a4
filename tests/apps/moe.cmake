# moe_train end to end: the quickstart config (shortened), and clear errors for bad input.
add_test(NAME moe_train_quickstart_np2
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS} --oversubscribe
                 $<TARGET_FILE:moe_train> --config ${PROJECT_SOURCE_DIR}/configs/moe.ini --train.iterations=20 ${MPIEXEC_POSTFLAGS})
set_tests_properties(moe_train_quickstart_np2 PROPERTIES TIMEOUT 120 PROCESSORS 2
  PASS_REGULAR_EXPRESSION "\"app\":\"moe_train\",\"ranks\":2,\"policy\":\"static\".*\"dropped\":0"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
# The BERT quickstart (shortened): masked-token loss and accuracy in the summary.
add_test(NAME moe_train_bert_quickstart_np2
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS} --oversubscribe
                 $<TARGET_FILE:moe_train> --config ${PROJECT_SOURCE_DIR}/configs/moe_bert.ini --train.iterations=20 ${MPIEXEC_POSTFLAGS})
set_tests_properties(moe_train_bert_quickstart_np2 PROPERTIES TIMEOUT 120 PROCESSORS 2
  PASS_REGULAR_EXPRESSION "val_masked_accuracy [0-9.]+.*\"final_masked_loss\":[0-9.]+,\"final_masked_accuracy\":[0-9.]+.*\"final_val_masked_accuracy\":[0-9.]+"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
add_test(NAME moe_train_bad_policy COMMAND $<TARGET_FILE:moe_train> --moe.policy=tutel)
set_tests_properties(moe_train_bad_policy PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "moe.policy"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# A misspelt key is answered with its own section's near key first (train.blas_threads, not
# model.heads, for train.threads).
add_test(NAME moe_train_misspelt_key_hint COMMAND $<TARGET_FILE:moe_train> --train.threads=2)
set_tests_properties(moe_train_misspelt_key_hint PROPERTIES TIMEOUT 60
  PASS_REGULAR_EXPRESSION "unknown key 'train.threads' \\(did you mean 'train.blas_threads'\\?\\)"
  FAIL_REGULAR_EXPRESSION "model.heads"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# Experts that two ranks cannot share: every rank finds it, so rank 0 alone prints one line (no
# rank prefix, no MPI_Abort banner) saying what is wrong, the key and the fix; exit status 1.
add_test(NAME moe_train_experts_not_dividing_ranks_np2
         COMMAND sh -c "out=$(timeout 60 \"$0\" \"$@\" 2>&1); rc=$?; echo \"$out\"; echo \"exit code $rc\"; [ $rc -eq 1 ] && [ \"$(echo \"$out\" | grep -c 'error:')\" -eq 1 ] && echo \"$out\" | grep -q '^error: moe.num_experts = 3 cannot be shared evenly by the 2 ranks .*: set moe.num_experts to a multiple of 2 (4, say) or launch a number of ranks that divides 3$' && ! echo \"$out\" | grep -q MPI_ABORT"
                 ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS} --oversubscribe
                 $<TARGET_FILE:moe_train> --moe.num_experts=3 --moe.top_k=1 ${MPIEXEC_POSTFLAGS})
set_tests_properties(moe_train_experts_not_dividing_ranks_np2 PROPERTIES TIMEOUT 90 PROCESSORS 2
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
add_test(NAME moe_train_missing_text COMMAND $<TARGET_FILE:moe_train> --data.train=/nonexistent/corpus.txt)
set_tests_properties(moe_train_missing_text PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "/nonexistent/corpus.txt"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# A diverging run (weights of 1e30 overflow the first logits) stops with an error naming the
# iteration and a nonzero exit code, instead of training to `loss nan` and exiting 0.
add_test(NAME moe_train_diverged_exits_nonzero
         COMMAND sh -c "out=$(\"$0\" --model.init_std=1e30 --train.iterations=3 2>&1); rc=$?; echo \"$out\"; echo exit=$rc"
                 $<TARGET_FILE:moe_train>)
set_tests_properties(moe_train_diverged_exits_nonzero PROPERTIES TIMEOUT 60
  PASS_REGULAR_EXPRESSION "training diverged at iteration 0: the loss is [-a-z]+.*exit=[1-9]"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# train.device: cpu runs and the summary says so; cuda is refused where it cannot run (no GPU
# here: the error names the key; with a GPU, model.arch=swin: the error names both keys), never
# quietly run on the CPU.
add_test(NAME moe_train_device_cpu COMMAND $<TARGET_FILE:moe_train> --train.device=cpu --train.iterations=2)
set_tests_properties(moe_train_device_cpu PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "\"device\":\"cpu\""
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
add_test(NAME moe_train_device_cuda_refused
         COMMAND sh -c "out=$(\"$0\" --train.device=cuda --model.arch=swin --train.iterations=2 2>&1); rc=$?; echo \"$out\"; echo exit=$rc"
                 $<TARGET_FILE:moe_train>)
set_tests_properties(moe_train_device_cuda_refused PROPERTIES TIMEOUT 60
  PASS_REGULAR_EXPRESSION "train.device=cuda(, but this build has no CUDA|, but no CUDA device is visible| with model.arch=swin)[^\n]*.*exit=[1-9]"
  FAIL_REGULAR_EXPRESSION "\"device\":"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# moe_gpu_bench's GPT-MoE model row, dry-run on the host at a small shape: moe_train's Session
# steps it, and the row counts 3 x 33 = 99 tokens a step and 2 layers x 99 tokens x top-2 = 396
# routed rows (the static policy drops none), the count its expert TFLOP/s is computed from.
add_test(NAME moe_gpu_bench_model_row_cpu
         COMMAND $<TARGET_FILE:moe_gpu_bench> --bench.rows=model --bench.model_device=cpu --bench.width=64
                 --bench.heads=4 --bench.seq=33 --bench.model_layers=2 --bench.model_experts=4 --bench.model_d_ff=96
                 --bench.model_batch=3 --bench.model_steps=3 --bench.topk=2)
set_tests_properties(moe_gpu_bench_model_row_cpu PROPERTIES TIMEOUT 60
  PASS_REGULAR_EXPRESSION "\"tokens_per_step\":99\\.0,.*\"routed_rows\":396\\.0,\"expert_gemm_TFLOPs\":[0-9]"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
