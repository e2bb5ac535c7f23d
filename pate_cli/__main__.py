from pate_cli.cli import main

main()
