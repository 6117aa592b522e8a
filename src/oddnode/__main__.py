from oddnode.start import main

main()
