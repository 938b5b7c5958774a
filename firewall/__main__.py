from firewall.cli import main

main(prog_name="firewall")
