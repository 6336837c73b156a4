# Sourced by the FlexMoE reproduce scripts that train with moe_train and replay with
# placement_sim (reproduce_flexmoe_recorded.sh, reproduce_flexmoe_models.sh).
# moe_apps_ready BUILD_DIR: builds moe_train and placement_sim there when missing, and lets
# mpirun run them as root.
moe_apps_ready() {
  local build_dir=$1 app
  for app in moe_train placement_sim; do
    if [[ ! -x "$build_dir/apps/$app" ]]; then
      cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
      cmake --build "$build_dir" -j "${SKEW_JOBS:-2}" --target "$app"
    fi
  done
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}
