from taskcost.cli import main

main()
