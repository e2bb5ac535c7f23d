from pate_cli.cli.entry import main

main()
