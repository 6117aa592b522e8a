from oddnode.app.cli import main

main()
