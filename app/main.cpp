#include "app/cli.hpp"

int main(int argc, char** argv) { return attnbench::run_cli(argc, argv); }
