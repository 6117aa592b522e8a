from oddnode.cli import main

main()
