from pate_cli.cli.app import main

main()
