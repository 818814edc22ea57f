// chameleond: the node daemon. Runs with no configuration at all; every setting has a default,
// /etc/chameleon/chameleond.yaml (or --config) and flags override it (service_main.cc).
#include "chameleon/daemon/service_main.h"

int main(int argc, char** argv) { return chameleon::daemon::RunChameleond(argc, argv); }
