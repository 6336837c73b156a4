# End-to-end: the quickstart command, and the simulator on the same config.
add_test(NAME preduce_train_quickstart_np2
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS} --oversubscribe
                 $<TARGET_FILE:preduce_train> --config ${PROJECT_SOURCE_DIR}/configs/preduce.ini ${MPIEXEC_POSTFLAGS})
set_tests_properties(preduce_train_quickstart_np2 PROPERTIES TIMEOUT 120 PROCESSORS 2
  PASS_REGULAR_EXPRESSION "\"mode\":\"preduce\".*\"final_accuracy_mean\":0\\.9"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
add_test(NAME preduce_train_simulate
         COMMAND $<TARGET_FILE:preduce_train> --config ${PROJECT_SOURCE_DIR}/configs/preduce.ini --simulate --sim.workers=16)
set_tests_properties(preduce_train_simulate PROPERTIES TIMEOUT 120
  PASS_REGULAR_EXPRESSION "\"simulate\":true.*\"workers\":16.*\"final_accuracy_mean\":0\\.9"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
add_test(NAME preduce_train_bad_key COMMAND $<TARGET_FILE:preduce_train> --preduce.group_sise=2)
set_tests_properties(preduce_train_bad_key PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "group_sise"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
add_test(NAME preduce_train_bad_refresh
         COMMAND $<TARGET_FILE:preduce_train> --simulate --preduce.overlap=true --preduce.refresh_staleness=1)
set_tests_properties(preduce_train_bad_refresh PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "refresh_staleness must be 0"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# Issue 17: bad values stop at start-up with a message naming the key, never run or hang.
add_test(NAME preduce_train_group_larger_than_ranks_np2
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS} --oversubscribe
                 $<TARGET_FILE:preduce_train> --preduce.group_size=3 ${MPIEXEC_POSTFLAGS})
set_tests_properties(preduce_train_group_larger_than_ranks_np2 PROPERTIES TIMEOUT 60 PROCESSORS 2
  PASS_REGULAR_EXPRESSION "preduce.group_size 3 is more than the 2 workers"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
add_test(NAME preduce_train_group_size_one COMMAND $<TARGET_FILE:preduce_train> --simulate --preduce.group_size=1)
set_tests_properties(preduce_train_group_size_one PROPERTIES TIMEOUT 60
  PASS_REGULAR_EXPRESSION "preduce.group_size must be 0 \\(auto\\) or >= 2"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
add_test(NAME preduce_train_mnist_huge_label
         COMMAND ${CMAKE_COMMAND} -E env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
                 sh -c "d=$(mktemp -d) && printf '2147483647,0.5,0.25\\n0,0.1,0.2\\n' > $d/train.csv && cp $d/train.csv $d/test.csv && $0 --simulate --data.source=mnist --data.mnist_dir=$d; rm -r $d"
                 $<TARGET_FILE:preduce_train>)
set_tests_properties(preduce_train_mnist_huge_label PROPERTIES TIMEOUT 60
  PASS_REGULAR_EXPRESSION "train.csv:1: label 2147483647 is not among the 10 classes of the data set")
# A diverging learning rate (train.lr = 100 on the default clusters: inf/nan by step 10) stops
# the run with an error naming the worker, the step and the value, and a nonzero exit (checked
# through "exit=N" printed after it); under mpirun the rank that throws aborts the whole job,
# also while its peers wait for a group.
add_test(NAME preduce_train_diverged_simulate
         COMMAND sh -c "$0 --simulate --train.lr=100; echo exit=$?" $<TARGET_FILE:preduce_train>)
set_tests_properties(preduce_train_diverged_simulate PROPERTIES TIMEOUT 60
  PASS_REGULAR_EXPRESSION "worker [0-9]+ step [0-9]+: the loss is -?(nan|inf).*exit=[1-9]"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
foreach(mode allreduce preduce)
  add_test(NAME preduce_train_diverged_${mode}_np2
           COMMAND sh -c "$0 $1 2 $2 --oversubscribe $3 --sync.mode=${mode} --train.lr=100; echo exit=$?"
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} "${MPIEXEC_PREFLAGS}" $<TARGET_FILE:preduce_train>)
  set_tests_properties(preduce_train_diverged_${mode}_np2 PROPERTIES TIMEOUT 60 PROCESSORS 2
    PASS_REGULAR_EXPRESSION "rank [01]: error: [^\n]*worker [01] step [0-9]+: the loss is -?(nan|inf).*exit=[1-9]"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endforeach()
