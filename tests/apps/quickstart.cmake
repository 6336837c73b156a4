# scripts/quickstart.sh on this build's apps (--prebuilt: no install, no build): timestamped steps,
# each app's result and its run directory (output.dir: per-rank files named metrics.rank<N>.jsonl), next steps.
if(TARGET moe_train AND TARGET preduce_train AND TARGET wide_train)
  add_test(NAME quickstart_prebuilt COMMAND ${PROJECT_SOURCE_DIR}/scripts/quickstart.sh --prebuilt ${CMAKE_BINARY_DIR})
  set_tests_properties(quickstart_prebuilt PROPERTIES TIMEOUT 180 PROCESSORS 2
    ENVIRONMENT "SKEW_OUT=${CMAKE_CURRENT_BINARY_DIR}/quickstart_out"
    PASS_REGULAR_EXPRESSION "\\[[0-9][0-9]:[0-9][0-9]\\] step 1/3: run wide_train.*\\] step 3/3: run preduce_train.*What you should see.*wide_train +validation AUC 0\\.8[0-9]+.*moe_train +final loss [0-9.]+, validation loss [0-9.]+, 0 tokens dropped.*preduce_train +test accuracy 0\\.9[0-9]+.*in [^\n]*/preduce_train/: checkpoints/ config\\.ini curve\\.csv log\\.txt metrics\\.rank0\\.jsonl metrics\\.rank1\\.jsonl summary\\.json\nThe last line.*Next steps:.*\n  3\\. ")
endif()
