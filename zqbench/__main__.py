from zqbench.cli import main

main()
