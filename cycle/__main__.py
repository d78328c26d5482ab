from cycle.cli import main

main()
