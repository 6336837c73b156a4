# MoE runtime on 1, 2 and 4 ranks: finite differences, expert parallelism, replicas, policies.
skew_mpi_test(skew_moe_mpi_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_layer.cpp
  LIBS skew_moe skew_app_options
  NP 1 2 4)
# The deepspeed policy against DeepSpeed's capacity, padding and drop order.
skew_mpi_test(skew_moe_deepspeed_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_deepspeed.cpp
  LIBS skew_moe skew_app_options
  NP 1 2 4)
skew_mpi_test(skew_moe_train_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_train.cpp
  LIBS skew_moe skew_app_options
  NP 2)
skew_mpi_test(skew_moe_resume_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_resume.cpp
  LIBS skew_moe skew_app_options
  NP 2)
skew_mpi_test(skew_moe_resume_verify_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_resume_verify.cpp
  LIBS skew_moe skew_app_options
  NP 2)
skew_mpi_test(skew_moe_reshard_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_reshard.cpp
  LIBS skew_moe skew_app_options
  NP 4)
# FasterMoE's smart schedule: chunked pairwise exchange equals the one all-to-all, bit for bit.
skew_mpi_test(skew_moe_schedule_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_smart_schedule.cpp
  LIBS skew_moe skew_app_options
  NP 2 3)
# Swin-MoE: gradients against finite differences, expert-parallel against 1 rank (float64).
skew_mpi_test(skew_moe_swin_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_swin.cpp
  LIBS skew_moe skew_app_options
  NP 1 2)
# moe_train with model.arch = swin: learning, every dropless policy against static, bit-exact resume.
skew_mpi_test(skew_moe_swin_train_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_swin_train.cpp
  LIBS skew_moe skew_app_options
  NP 2)
# BERT: the bidirectional network's gradients and masked loss; training under every policy.
skew_mpi_test(skew_bert_network_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bert_network.cpp
  LIBS skew_moe skew_app_options
  NP 1 2 4)
skew_mpi_test(skew_bert_train_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bert_train.cpp
  LIBS skew_moe skew_app_options
  NP 2)
# Routing traces: the header a replay is checked against, the old raw format refused, resume.
skew_mpi_test(skew_moe_trace_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_trace.cpp
  LIBS skew_moe skew_app_options
  NP 2)
# moe_train's memory estimate against built networks (issue 38).
skew_mpi_test(skew_moe_memory_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_memory.cpp
  LIBS skew_moe skew_app_options
  NP 1 2)
