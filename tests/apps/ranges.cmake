# Issue 17: every numeric key of every app declares its range (--help shows "(int in [..]" or
# "(float >= ..", never a bare "(int, default"), and bad values stop at start-up naming the key.
# Every app is checked without being listed again: apps/CMakeLists.txt's skew_app records each.
set(skew_root_env "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
get_property(skew_apps GLOBAL PROPERTY SKEW_APPS)
foreach(app ${skew_apps})
  add_test(NAME ${app}_ranges_declared COMMAND $<TARGET_FILE:${app}> --help)
  set_tests_properties(${app}_ranges_declared PROPERTIES TIMEOUT 60 ENVIRONMENT "${skew_root_env}"
    PASS_REGULAR_EXPRESSION "usage: ${app}" FAIL_REGULAR_EXPRESSION "\\((int|float), default")
endforeach()
# skew_bad_value(NAME "MESSAGE REGEX" APP ARGS...): the app stops with that message.
function(skew_bad_value name regex app)
  add_test(NAME ${name} COMMAND $<TARGET_FILE:${app}> ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT 60 ENVIRONMENT "${skew_root_env}" PASS_REGULAR_EXPRESSION "${regex}")
endfunction()
skew_bad_value(placement_sim_top_k_zero "bad value '0' for key 'sim.top_k': expected an integer in" placement_sim
               --sim.top_k=0 --sim.iterations=5)
skew_bad_value(placement_sim_negative_capacity "bad value '-1' for key 'sim.capacity_factor'" placement_sim
               --sim.capacity_factor=-1 --sim.iterations=5)
skew_bad_value(placement_sim_top_k_above_experts "sim.top_k 3 is more than the 2 experts" placement_sim
               --sim.gpus=2 --sim.top_k=3 --sim.iterations=5)
skew_bad_value(placement_sim_futures_of_recorded_trace "sim.plan_futures needs a generated trace: a recorded one \\(/no/trace.jsonl"
               placement_sim --sim.trace=/no/trace.jsonl --sim.plan_futures=5 --sim.iterations=5)
skew_bad_value(placement_sim_nan_zipf "bad value 'nan' for key 'sim.zipf': expected a finite number" placement_sim
               --sim.zipf=nan --sim.iterations=5)
skew_bad_value(wide_bench_zero_threads "bad value '0' for key 'bench.threads'" wide_bench --bench.threads=0
               --bench.data=synthetic:criteo?rows=1000&features=1000&alpha=1.1&seed=1)
skew_bad_value(skew_commbench_zero_iters "bad value '0' for key 'bench.iters'" skew_commbench --bench.iters=0)
# Checked by the config layer for every schema, moe_train's and wide_train's included.
skew_bad_value(moe_train_nan_lr "bad value 'nan' for key 'train.lr': expected a finite number" moe_train --train.lr=nan)
skew_bad_value(wide_train_inf_init_std "bad value 'inf' for key 'model.init_std': expected a finite number" wide_train
               --model.init_std=inf)
skew_bad_value(moe_train_config_directory "--config '.*' is a directory, expected an INI file" moe_train
               --config ${PROJECT_SOURCE_DIR}/configs)
# moe_train: the values that crashed (SIGFPE) or hung before they had ranges, and the joint checks.
skew_bad_value(moe_train_zero_heads "bad value '0' for key 'model.heads'" moe_train --model.heads=0)
skew_bad_value(moe_train_zero_batch "bad value '0' for key 'train.batch_size'" moe_train --train.batch_size=0)
skew_bad_value(moe_train_negative_corpus "bad value '-1' for key 'data.builtin_bytes'" moe_train
               --data.builtin_bytes=-1)
skew_bad_value(moe_train_heads_not_dividing "model.d_model 30 is not a multiple of model.heads 4 \\([^)]*\\): set model.d_model to a multiple of 4 \\(32, say\\) or model.heads to a divisor of 30 \\(3, say\\)" moe_train
               --model.d_model=30 --model.heads=4)
skew_bad_value(moe_train_top_k_above_experts "moe.top_k = 5 routes each token to more experts than the 4 of moe.num_experts: set moe.top_k to at most 4 or raise moe.num_experts" moe_train
               --moe.top_k=5 --moe.num_experts=4)
skew_bad_value(moe_train_corpus_too_short "built-in corpus \\(data.builtin_bytes\\): [0-9]+ bytes is too short for model.seq_len 64"
               moe_train --data.builtin_bytes=50 --model.seq_len=64)
skew_bad_value(moe_train_resume_without_directory "output.resume = true needs output.checkpoint_dir" moe_train
               --output.resume=true)
add_test(NAME moe_train_eval_sequences_below_ranks_np2
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe $<TARGET_FILE:moe_train>
                 --train.eval_sequences=1 --train.iterations=2)
set_tests_properties(moe_train_eval_sequences_below_ranks_np2 PROPERTIES TIMEOUT 60 ENVIRONMENT "${skew_root_env}"
  PASS_REGULAR_EXPRESSION "train.eval_sequences 1 is fewer than the 2 ranks")
# --predict without its arguments names each one missing and how to give it.
skew_bad_value(wide_train_predict_without_model "^error: --predict needs --predict.model=FILE \\(a model.safetensors a training run saved\\): add it"
               wide_train --predict --predict.data=rows.libsvm)
skew_bad_value(wide_train_predict_without_arguments
               "error: --predict needs --predict.model=FILE \\([^)]*\\) and --predict.data=FILE \\(the rows to score\\)"
               wide_train --predict)
set_tests_properties(wide_train_predict_without_model PROPERTIES FAIL_REGULAR_EXPRESSION "predict.data=FILE|check failed")
skew_bad_value(moe_train_bert_mask_shares_above_one
               "bert.mask_token_prob 0.8 \\+ bert.random_token_prob 0.3 exceeds 1 .*: lower one so that the two sum to at most 1"
               moe_train --model.arch=bert --bert.mask_token_prob=0.8 --bert.random_token_prob=0.3)
