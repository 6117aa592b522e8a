from oddnode.main import main

main()
